import inspect

import pytest

pytest.importorskip("playwright")

from playwright._impl import _connection  # noqa: E402

from esopt.envs.browser.pw_stack import fast_stacks, frame_stack  # noqa: E402


def _both():
    return inspect.stack(), frame_stack()  # one line: both from the same frame and line


def test_frame_stack_gives_what_playwright_reads_from_inspect_stack():
    full, fast = _both()
    assert len(full) == len(fast) > 3
    for a, b in zip(full, fast):
        assert (a.frame, a.filename, a.lineno, a.function) == (b.frame, b.filename, b.lineno, b.function)
    for internal in (False, True):
        assert (_connection._extract_stack_trace_information_from_stack(full, internal)
                == _connection._extract_stack_trace_information_from_stack(fast, internal))


def test_fast_stacks_swaps_only_inside_the_block_and_nests():
    from playwright._impl import _network, _sync_base

    modules = (_connection, _network, _sync_base)
    assert all(m.inspect is inspect for m in modules)
    with fast_stacks():
        assert all(m.inspect.stack is frame_stack for m in modules)
        assert _connection.inspect.FrameInfo is inspect.FrameInfo  # everything else is the real module's
        with fast_stacks():
            assert _connection.inspect.stack is frame_stack
        assert _connection.inspect.stack is frame_stack  # the inner block leaves the outer one's swap
    assert all(m.inspect is inspect for m in modules)
    with pytest.raises(ValueError), fast_stacks():
        raise ValueError("restored on errors too")
    assert all(m.inspect is inspect for m in modules)
