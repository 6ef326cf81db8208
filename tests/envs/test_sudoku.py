import statistics
import time

import pytest

from esopt.envs.sudoku import (
    Puzzle,
    SudokuEnv,
    SudokuTasks,
    count_solutions,
    find_moves,
    generate_puzzle,
    is_valid_complete,
    parse_action,
)
from esopt.utils.seeding import derive_seed

# Hand-made 4x4 puzzle with a unique solution. r1c1 has two legal values
# (1 is right, 3 is legal but wrong), so the agent can dead-end itself.
SOLUTION = ((1, 2, 3, 4), (3, 4, 1, 2), (2, 1, 4, 3), (4, 3, 2, 1))
GRID = ((0, 0, 0, 4), (0, 4, 1, 2), (2, 1, 4, 3), (4, 3, 2, 1))
HAND = Puzzle(size=4, grid=GRID, solution=SOLUTION)


def _env(**kw):
    env = SudokuEnv(puzzle=HAND, **kw)
    env.reset()
    return env


# ------------------------------------------------------------------ seeding


def test_derive_seed_stable_and_63_bit():
    assert derive_seed("a", 1) == derive_seed("a", 1)
    assert derive_seed("a", 1) != derive_seed("a", 2) != derive_seed(("a", 1))
    assert all(0 <= derive_seed(i) < 2**63 for i in range(100))


# ------------------------------------------------------------------- solver


def test_hand_puzzle_is_unique():
    assert count_solutions(GRID) == 1
    assert is_valid_complete(SOLUTION)


def test_count_solutions_counts_all_4x4_grids():
    empty = [[0] * 4 for _ in range(4)]
    assert count_solutions(empty, limit=1000) == 288
    assert count_solutions(empty) == 2  # stops at the default limit


def test_count_solutions_conflicting_givens_is_zero():
    grid = [list(r) for r in GRID]
    grid[0][0] = 4  # 4 already in row 1
    assert count_solutions(grid) == 0


def test_is_valid_complete_negatives():
    bad = [list(r) for r in SOLUTION]
    bad[0][0], bad[0][1] = bad[0][1], bad[0][0]  # rows fine, columns broken
    assert not is_valid_complete(bad)
    assert not is_valid_complete(GRID)  # has blanks
    assert not is_valid_complete([[1, 2, 3], [2, 3, 1], [3, 1, 2]])  # unsupported size
    # rows and columns are Latin but boxes are not
    latin = [[1, 2, 3, 4], [2, 3, 4, 1], [3, 4, 1, 2], [4, 1, 2, 3]]
    assert not is_valid_complete(latin)


# ---------------------------------------------------------------- generator


@pytest.mark.parametrize(
    "size,blanks,seeds",
    [(4, 1, 40), (4, 4, 40), (4, 8, 40), (4, 12, 40), (9, 1, 10), (9, 15, 20), (9, 40, 8)],
)
def test_generated_puzzles_unique_exact_and_consistent(size, blanks, seeds):
    for seed in range(seeds):
        p = generate_puzzle(size, blanks, seed)
        assert p.size == size and len(p.grid) == size and all(len(r) == size for r in p.grid)
        assert sum(v == 0 for row in p.grid for v in row) == blanks == p.blanks
        assert count_solutions(p.grid) == 1
        assert is_valid_complete(p.solution)
        for r in range(size):
            for c in range(size):
                assert p.grid[r][c] in (0, p.solution[r][c])


def test_generator_deterministic_and_varied():
    for size, blanks in [(4, 3), (9, 15)]:
        assert generate_puzzle(size, blanks, 7) == generate_puzzle(size, blanks, 7)
        grids = {generate_puzzle(size, blanks, s).grid for s in range(20)}
        assert len(grids) >= 15


@pytest.mark.parametrize("size", [0, 3, 5, 16, True])
def test_generator_rejects_bad_size(size):
    with pytest.raises(ValueError, match="size"):
        generate_puzzle(size, 1, 0)


@pytest.mark.parametrize("size,blanks", [(4, 0), (4, 13), (4, 16), (9, 0), (9, 70), (4, 2.5)])
def test_generator_rejects_bad_blanks(size, blanks):
    with pytest.raises(ValueError, match="blanks"):
        generate_puzzle(size, blanks, 0)


def test_generator_is_fast():
    def median_ms(size, blanks, n):
        times = []
        for seed in range(n):
            t = time.perf_counter()
            generate_puzzle(size, blanks, seed)
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e3

    assert median_ms(9, 15, 10) < 50
    assert median_ms(4, 3, 50) < 2


# -------------------------------------------------------------------- tasks


def test_heldout_deterministic_and_distinct():
    a = SudokuTasks(4, 3, seed=1).heldout(20)
    b = SudokuTasks(4, 3, seed=1).heldout(20)
    assert a == b
    assert len({p.grid for p in a}) == 20
    assert SudokuTasks(4, 3, seed=2).heldout(20) != a
    tasks = SudokuTasks(4, 3, seed=1)
    assert tasks.heldout(5) == a[:5]  # a prefix of the same stream


def test_train_deterministic_distinct_and_keyed():
    tasks = SudokuTasks(4, 3, seed=0)
    first = tasks.train(32, key=0)
    assert first == SudokuTasks(4, 3, seed=0).train(32, key=0)
    assert len({p.grid for p in first}) == 32
    assert first != tasks.train(32, key=1)
    assert first != tasks.train(32, key="0")
    assert all(p.blanks == 3 and count_solutions(p.grid) == 1 for p in first)


def test_train_never_hits_heldout_reserve():
    # 4x4 with one blank has only 288 * 16 puzzles, so raw streams collide.
    tasks = SudokuTasks(4, 1, seed=0, heldout_reserve=256)
    reserved = {p.grid for p in tasks.heldout(256)}
    assert tasks.reserved_grids == reserved
    raw = {tasks._gen("train", "k", i).grid for i in range(300)}
    assert raw & reserved, "test needs a stream that would collide without filtering"
    train = tasks.train(300, key="k")
    assert len(train) == 300
    assert not {p.grid for p in train} & reserved
    assert len({p.grid for p in train}) == 300


# ------------------------------------------------------------------- parser


@pytest.mark.parametrize(
    "text",
    [
        "r2c3=4",
        "R2C3 = 4",
        "r2c3: 4",
        "2 3 4",
        "[2 3 4]",
        "(2, 3, 4)",
        r"\boxed{2 3 4}",
        "row 2 col 3 = 4",
        "row 2, column 3: 4",
        "Row 2, Column 3 -> 4",
        "r2, c3 = 4",
        "I will place r2c3=4 because it is the only digit left.",
        "The answer is \\boxed{2, 3, 4}.",
        "Answer: 2 3 4.",
        "Let me put row 2 col 3 = 4 now",
        "First r2c3=4, then maybe r1c1=2",
        "r2c3=4 rather than 1 1 2",
        "(2,3)=4",
        "cell (2, 3): 4",
        "(2, 3) -> 4",
        "Put 4 in r2c3",
        "place 4 at r2c3",
        "I'll place the digit 4 at row 2, column 3.",
        "write 4 into (2,3)",
        "r2 c3 = 4",
        "(row 2, col 3) = 4",
        "r02c03=04",
        "row 2 col 3 = 4, or else r1c1=1",
        "<think>r1c1=1 is wrong, try row 4 col 4 = 1</think>\nr2c3=4",
        "reasoning r1c1=1 ...</think> final: r2c3=4",
        "r1c1=1</think>draft<think>r1c2=2</think> r2c3=4",
    ],
)
def test_parser_accepts(text):
    assert parse_action(text, 4) == (2, 3, 4)
    assert parse_action(text, 9) == (2, 3, 4)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "I don't know",
        "r2c3",
        "r2c3=",
        "row 2 col 3",
        "2 3",
        "1 2 3 4",
        "r0c1=1",
        "r2c3=0",
        "r10c3=4",
        "r2c34",
        "2.5 3 4",
        "<think>r2c3=4</think>",
        "<think>r2c3=4 unfinished",
        "(2,3) 4",
        "(2,3)",
        "put 4 in the box",
    ],
)
def test_parser_rejects(text):
    assert parse_action(text, 4) is None
    assert parse_action(text, 9) is None


def test_parser_range_depends_on_size():
    assert parse_action("r5c1=9", 4) is None
    assert parse_action("r5c1=9", 9) == (5, 1, 9)
    assert parse_action("r9c9=10", 9) is None
    assert parse_action("r5c1=9 then r1c1=1", 4) is None  # first move decides
    with pytest.raises(ValueError, match="size"):
        parse_action("r1c1=1", 5)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1 2 3 4\nr2c3=4", (2, 3, 4)),  # an echoed board row before the move
        ("Row 1 has 1, 2, 4 so r1c3=3", (1, 3, 3)),  # a bare triple before the move
        ("3 1 2 first? No: row 2 col 3 = 4", (2, 3, 4)),
        ("[2 3 4] means (1,1)=1", (1, 1, 1)),
        ("r1 |  2  1  4 | so Put 3 in r1c4", (1, 4, 3)),
        ("2 3 4 or 1 1 2", (2, 3, 4)),  # without an explicit move, the first bare triple
    ],
)
def test_explicit_move_beats_earlier_bare_triples(text, expected):
    assert parse_action(text, 4) == expected
    assert find_moves(text)[0].in_range(4) == expected


def test_find_moves_lists_every_move_in_order():
    moves = find_moves("1 2 3 4 r1c1=1, then Put 2 in row 1 col 2, then (1,3)=3, then r1c1=1")
    assert [m.in_range(4) for m in moves] == [(1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 1, 1)]
    assert all(m.explicit for m in moves)
    assert [str(m) for m in find_moves("2 3 4 or 1 1 2")] == ["r2c3=4", "r1c1=2"]
    assert find_moves(None) == [] and find_moves("no move") == []


BIG = "9" * 5000  # int() of more than 4300 digits raises ValueError in Python 3.11


@pytest.mark.parametrize(
    "text",
    [BIG, f"r2c3={BIG}", f"r{BIG}c3=4", f"r2c{BIG}=4", f"{BIG} 3 4", f"2 3 {BIG}", f"({BIG},3)=4",
     f"Put {BIG} in r2c3", f"row 2 col {BIG} = 4", f"r2c3=4{BIG}"],
)
def test_parser_huge_numbers_are_out_of_range(text):
    assert parse_action(text, 4) is None
    assert parse_action(text, 9) is None


def test_parser_huge_leading_zeros_are_the_number():
    assert parse_action("r1c1=" + "0" * 5000 + "1", 4) == (1, 1, 1)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1 2 3" + " " * 100_000 + "x", (1, 2, 3)),  # trailing whitespace after a triple
        ("r1" + " " * 100_000, None),
        ("row 1" + " " * 100_000 + "col", None),
        ("r1c1" + " " * 100_000 + "=", None),
        ("1 " * 50_000 + "x", None),  # one long run of numbers
        ("5, 1 2 3; " * 10_000, None),  # many runs of four numbers
        ("(1," * 30_000, None),
        ("put 4 in " * 10_000, None),
        ("<think>" * 14_000 + "r1c1=1", None),  # unclosed thinking
        ("</think>" * 12_000 + "r1c1=1", (1, 1, 1)),
        ("r1c1=1 " * 15_000, (1, 1, 1)),
        ("r2c3=4" + "9" * 100_000, None),
    ],
)
def test_parser_long_adversarial_replies(text, expected):
    assert len(text) >= 90_000
    assert parse_action(text, 4) == expected


# ---------------------------------------------------------------------- env


def test_env_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        SudokuEnv(size=6)
    with pytest.raises(ValueError, match="blanks"):
        SudokuEnv(size=4, blanks=0)
    with pytest.raises(ValueError, match="reward"):
        SudokuEnv(reward="dense")
    with pytest.raises(ValueError, match="max_turns"):
        SudokuEnv(max_turns=0)


def test_reset_observation_and_defaults():
    env = SudokuEnv(puzzle=HAND)
    assert env.max_turns == 12  # 3 * blanks
    obs, info = env.reset()
    assert info["puzzle"] == HAND and info["turn"] == 0
    board = [
        "     c1 c2   c3 c4",
        "   +-------+-------+",
        "r1 |  .  . |  .  4 |",
        "r2 |  .  4 |  1  2 |",
        "   +-------+-------+",
        "r3 |  2  1 |  4  3 |",
        "r4 |  4  3 |  2  1 |",
        "   +-------+-------+",
    ]
    assert "\n".join(board) in obs
    assert "Empty cells: r1c1, r1c2, r1c3, r2c1" in obs
    assert "Turns left: 12" in obs
    assert env.render_text() == obs


def test_reset_seeded_is_deterministic_and_default_max_turns():
    env = SudokuEnv(size=4, blanks=3)
    assert env.max_turns == 9
    obs1, info1 = env.reset(seed=5)
    obs2, info2 = SudokuEnv(size=4, blanks=3).reset(seed=5)
    assert obs1 == obs2 and info1["puzzle"] == generate_puzzle(4, 3, 5)
    grids = {env.reset(seed=s)[1]["puzzle"].grid for s in range(10)}
    assert len(grids) > 5
    _, info = env.reset(puzzle=HAND)
    assert info["puzzle"] == HAND and env.max_turns == 12
    assert SudokuEnv(size=9, blanks=15).reset(seed=0)[1]["puzzle"].blanks == 15


def test_solving_terminates_with_reward_one():
    for mode in ("binary", "partial"):
        env = _env(reward=mode)
        moves = ["r1c1=1", "row 1 col 2 = 2", "(1, 3, 3)", "r2c1=3"]
        for i, move in enumerate(moves):
            obs, reward, term, trunc, info = env.step(move)
            assert info["valid"] and info["turn"] == i + 1
            assert "accepted" in info["feedback"] and info["feedback"] in obs
            last = i == len(moves) - 1
            assert (term, trunc, info["solved"]) == (last, False, last)
            assert reward == (1.0 if last else 0.0)
        assert "Empty cells: none" in obs
        with pytest.raises(RuntimeError):
            env.step("r1c1=1")


@pytest.mark.parametrize(
    "move,expected",
    [
        ("r1c1=4", "rejected: 4 already in row 1"),
        ("r1c1=2", "rejected: 2 already in column 1"),
        ("r2c2=3", "r2c2 is a given cell"),
        ("r5c1=1", "between 1 and 4"),
        ("r1c1=5", "between 1 and 4"),
        ("no idea", "could not parse your answer; answer like r2c3=4"),
    ],
)
def test_rejected_moves_consume_a_turn_and_keep_board(move, expected):
    env = _env()
    before = [row[:] for row in env.board]
    obs, reward, term, trunc, info = env.step(move)
    assert not info["valid"] and expected in info["feedback"] and expected in obs
    assert env.board == before
    assert info["turn"] == 1 and "Turns left: 11" in obs
    assert (reward, term, trunc, info["solved"]) == (0.0, False, False, False)
    if move == "r1c1=4":
        assert info["action"] == (1, 1, 4)
    if move in ("r5c1=1", "no idea"):
        assert info["action"] is None


def test_box_conflict_is_rejected():
    # The hand-made board has no box-only conflict, so look for one in generated boards.
    for seed in range(200):
        p = generate_puzzle(4, 6, seed)
        for r, c in p.blank_cells:
            row = set(p.grid[r])
            col = {p.grid[i][c] for i in range(4)}
            box = {p.grid[i][j] for i in range(r - r % 2, r - r % 2 + 2) for j in range(c - c % 2, c - c % 2 + 2)}
            only_box = (box - row - col) - {0}
            if only_box:
                v = min(only_box)
                env = SudokuEnv(puzzle=p)
                env.reset()
                _, _, _, _, info = env.step(f"r{r + 1}c{c + 1}={v}")
                assert not info["valid"] and f"{v} already in its box" in info["feedback"]
                return
    pytest.fail("no box-only conflict found")


def test_filled_cells_are_final():
    env = _env()
    assert env.step("r1c2=2")[4]["valid"]
    _, _, _, _, info = env.step("r1c2=1")
    assert not info["valid"] and "already filled" in info["feedback"]
    assert env.board[0][1] == 2


def test_legal_wrong_move_is_placed_then_truncation_and_rewards():
    for mode, expected in (("binary", 0.0), ("partial", 0.25)):
        env = _env(reward=mode, max_turns=4)
        steps = [env.step(m) for m in ("r1c1=3", "r1c2=2", "r1c3=1", "r2c1=1")]
        valid = [s[4]["valid"] for s in steps]
        assert valid == [True, True, False, False]  # r1c1=3 is legal but wrong
        assert env.board[0][0] == 3
        assert [s[1] for s in steps[:3]] == [0.0, 0.0, 0.0]
        obs, reward, term, trunc, info = steps[-1]
        assert (term, trunc, info["solved"]) == (False, True, False)
        assert reward == expected  # partial: only r1c2 of 4 blanks is right
        assert "Turns left: 0" in obs
        with pytest.raises(RuntimeError):
            env.step("r2c1=1")


def test_partial_reward_counts_correct_cells():
    env = _env(reward="partial", max_turns=3)
    env.step("r1c1=1")
    env.step("r1c2=2")
    _, reward, term, trunc, _ = env.step("garbage")
    assert trunc and not term and reward == 0.5


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError):
        SudokuEnv().step("r1c1=1")


def test_echoed_board_row_before_move_is_not_the_move():
    env = _env()
    reply = "Row 1 reads . . . 4, so the missing digits are 1 3 2.\nr1c1=1"
    _, _, _, _, info = env.step(reply)
    assert info["valid"] and info["action"] == (1, 1, 1) and env.board[0][0] == 1
    assert info["feedback"] == "Last move r1c1=1: accepted."  # the bare triple is not a second move


def test_two_moves_only_first_applied_and_feedback_says_so():
    env = _env()
    obs, _, _, _, info = env.step("r1c1=1 and then r1c2=2")
    assert info["valid"] and info["action"] == (1, 1, 1)
    assert env.board[0][:2] == [1, 0]
    assert "only the first move, r1c1=1, was applied" in info["feedback"] and info["feedback"] in obs
    assert "2 different moves" in info["feedback"]
    # a rejected first move: the second is not tried either
    _, _, _, _, info = env.step("Put 2 in r1c1, or (1,2)=2, or row 1 col 3 = 3")
    assert not info["valid"] and "already filled" in info["feedback"]
    assert "3 different moves; only the first move, r1c1=2, was tried" in info["feedback"]
    assert env.board[0][:3] == [1, 0, 0]
    # the same move repeated is one move
    _, _, _, _, info = env.step("r1c2=2. So the answer is r1c2=2")
    assert info["valid"] and info["feedback"] == "Last move r1c2=2: accepted."
    # bare triples count when there is no explicit move
    _, _, _, _, info = env.step("1 3 3 or 2 1 3")
    assert info["valid"] and "only the first move, r1c3=3, was applied" in info["feedback"]


@pytest.mark.parametrize(
    "reply,shown",
    [
        (f"r1c1={BIG}", "r1c1=<5000-digit number>"),
        (f"r{BIG}c1=1", "r<5000-digit number>c1=1"),
        (f"r1c{BIG}=1", "r1c<5000-digit number>=1"),
        (f"{BIG} 1 1", "r<5000-digit number>c1=1"),
        (f"Put {BIG} in r1c1", "r1c1=<5000-digit number>"),
        ("(5,1)=1", "r5c1=1"),
        ("r0c1=1", "r0c1=1"),
        ("Put 7 in row 1 col 1", "r1c1=7"),
    ],
)
def test_huge_or_out_of_range_numbers_get_feedback(reply, shown):
    env = _env()
    obs, reward, term, trunc, info = env.step(reply)
    assert not info["valid"] and info["action"] is None
    assert info["feedback"] == f"Last move {shown}: rejected: row, column and value must each be between 1 and 4."
    assert info["feedback"] in obs and len(obs) < 1000  # the number is not echoed back
    assert (reward, term, trunc, info["turn"]) == (0.0, False, False, 1)


def test_huge_number_without_a_move_and_huge_first_of_two_moves():
    env = _env()
    _, _, _, _, info = env.step(f"The answer is {BIG}.")
    assert not info["valid"] and "could not parse" in info["feedback"]
    _, _, _, _, info = env.step(f"r1c1={BIG}, r1c1=1")
    assert not info["valid"] and env.board[0][0] == 0
    assert "only the first move, r1c1=<5000-digit number>, was tried" in info["feedback"]


def test_long_reply_through_step():
    env = _env()
    reply = "1 2 3" + " " * 100_000 + "then r1c1=1 " + "<think>" * 5_000
    _, _, _, _, info = env.step(reply)
    assert info["valid"] and info["action"] == (1, 1, 1)


def test_heldout_skip_plays_the_puzzles_after_the_first_ones():
    """tasks.heldout_skip: a fresh held-out set (puzzles skip..skip+n-1 of the same stream), still never
    trained on nor validated on."""
    from esopt.config import load_config
    from esopt.envs.spec import resolve

    def source(*over):
        c = load_config(None, ["tasks.validation=8", *over])
        return resolve("sudoku").task_source(c.env, c.tasks, 3)

    first, fresh = source("tasks.heldout=12"), source("tasks.heldout=4", "tasks.heldout_skip=8")
    assert fresh.heldout()[1] == first.heldout()[1][8:]
    assert fresh.validation()[1] == first.validation()[1]
    assert not set(fresh.heldout()[1]) & set(first.heldout()[1][:8])
    big = source("tasks.heldout=10", "tasks.heldout_skip=300")  # past the 256 reserved: the reserve grows
    held = set(big.heldout()[1])
    train = {t for g in range(3) for t in big.train(32, g)[1]}
    assert len(held) == 10 and not held & train and not held & set(big.validation()[1])
