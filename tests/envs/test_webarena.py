"""WebArena-format tasks without a browser: placeholders and WA_* variables, the URL and text rules,
what esopt refuses to grade, splits, the webarenalite/webarena-file namespaces (configs read from a
package's data file without importing it), the preflight errors, the judge client, and no network
at import."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from esopt.envs.browser.webarena import configs, sites
from esopt.envs.browser.webarena.grade import check_text, post_url, target_url
from esopt.envs.browser.webarena.judge import Judge, JudgeError
from esopt.envs.browser.webarena.scoring import check_contents, url_matches

ROOT = Path(__file__).resolve().parents[2]


def config(task_id=1, **eval_spec):
    spec = {"eval_types": ["string_match"], "reference_answers": {"must_include": ["42"]}, **eval_spec}
    return {"task_id": task_id, "sites": ["shopping"], "intent": "How many?", "intent_template_id": 100 + task_id,
            "start_url": "__SHOPPING__/", "require_login": False, "storage_state": None, "geolocation": None,
            "eval": spec}


# -- placeholders -------------------------------------------------------------------------------
def test_placeholders_are_filled_from_wa_variables():
    cfg = {"start_url": "__SHOPPING_ADMIN__/admin |AND| __SHOPPING__/",
           "eval": {"program_html": [{"url": "func:reddit_get_post_url('__last_url__')", "locator": ""}],
                    "reference_url": "__GITLAB__/x"}}
    assert sites.placeholders(cfg) == ["GITLAB", "SHOPPING", "SHOPPING_ADMIN"]
    urls = sites.site_urls(["SHOPPING", "SHOPPING_ADMIN", "GITLAB"],
                           {"WA_SHOPPING": "http://shop:7770/", "WA_SHOPPING_ADMIN": "http://shop:7780/admin",
                            "WA_GITLAB": "https://GitLab.example:8023"})
    filled = sites.fill(cfg, urls)
    assert filled["start_url"] == "http://shop:7780/admin/admin |AND| http://shop:7770/"
    assert filled["eval"]["reference_url"] == "https://GitLab.example:8023/x"
    assert filled["eval"]["program_html"][0]["url"] == "func:reddit_get_post_url('__last_url__')"  # not a site
    assert sites.hosts(urls) == ["gitlab.example", "shop"]
    assert cfg["start_url"].startswith("__SHOPPING_ADMIN__")  # the original is untouched


@pytest.mark.parametrize("environ, message", [
    ({}, "WA_SHOPPING is not set"), ({"WA_SHOPPING": "  "}, "WA_SHOPPING is not set"),
    ({"WA_SHOPPING": "shop:7770"}, "is not an http"), ({"WA_SHOPPING": "ftp://shop/"}, "is not an http"),
])
def test_missing_or_bad_site_variable_is_one_clear_line(environ, message):
    with pytest.raises(ValueError, match=message) as err:
        sites.site_urls(["SHOPPING"], environ)
    assert "\n" not in str(err.value)


# -- the rules ------------------------------------------------------------------------------------
@pytest.mark.parametrize("url, reference, ok", [
    ("http://h:1/a/b?x=1&y=2", "http://h:1/a/b?x=1", True),  # extra parameters are fine
    ("http://h:1/a/b/", "http://h:1/a/b", True),
    ("http://h:1/a/b?x=2", "http://h:1/a/b?x=1", False),
    ("http://h:1/a", "http://h:1/a/b", False),
    ("http://h:2/a/b", "http://h:1/a/b", False),
    ("http://h:1/c", "http://h:1/a |OR| http://h:1/c", True),
    ("http://h:1/x?label_name%5B%5D=question", "http://h:1/x?label_name%5B%5D=question&state=", True),
])
def test_url_gold_in_pred(url, reference, ok):
    assert url_matches(url, reference, "GOLD in PRED") is ok


def test_url_rules_differ_and_unknown_rule_is_refused():
    assert url_matches("http://h/a?x=1&y=2", "http://h/a?x=1", "GOLD in PRED")
    assert not url_matches("http://h/a?x=1&y=2", "http://h/a?x=1", "exact")
    with pytest.raises(ValueError, match="unknown url_note"):
        url_matches("http://h/", "http://h/", "PRED in GOLD")


def test_must_include_alternatives():
    assert check_contents("It is B0738JQG6Q", {"must_include": ["nope |OR| B0738JQG6Q"]})
    assert not check_contents("It is B0738JQG6Q", {"must_include": ["nope |OR| other"]})
    assert check_contents("by yjlou.", {"must_include": "yjlou"})  # WebArena task 349 gives a bare string
    assert not check_contents("by yjlou2", {"must_include": "yjlou"})


def test_check_text_with_a_stand_in_judge():
    asked = []

    class Stub:
        def same_answer(self, question, reference, answer):
            asked.append(("answer", reference, answer))
            return reference.lower() in answer.lower()

        def same_reason(self, question, reason, answer):
            asked.append(("reason", reason, answer))
            return "closed" in answer

    stub = Stub()
    assert check_text("Pittsburgh, 15231", {"fuzzy_match": ["pittsburgh", "15231"]}, "q", stub)
    assert not check_text("Pittsburgh", {"fuzzy_match": ["pittsburgh", "15231"]}, "q", stub)
    assert check_text("a, b", {"fuzzy_match": ["a", "b"]}, "q", stub, joined=True) and asked[-1][1] == "a, b"
    assert not check_text("x", {"must_include": ["y"], "fuzzy_match": ["x"]}, "q", stub)  # plain keys first
    n = len(asked)
    assert check_text("N/A", {"fuzzy_match": "N/A"}, "q", stub) and len(asked) == n  # no question asked
    assert check_text("The shop is closed", {"fuzzy_match": "N/A"}, "q", stub, note="closed")
    assert asked[-1][0] == "reason"
    with pytest.raises(JudgeError, match="needs an LLM judge"):
        check_text("x", {"fuzzy_match": ["x"]}, "q", None)


def test_reddit_post_url():
    assert post_url("http://r:9999/f/books/123/a-title/456") == "http://r:9999/f/books/123/"
    assert post_url("http://r:9999/forums") == "http://r:9999/forums"
    assert target_url("func:reddit_get_post_url('__last_url__')", "http://r/f/a/7/x") == "http://r/f/a/7/"
    assert target_url("last", "http://r/now") == "http://r/now"
    with pytest.raises(ValueError, match="helper esopt does not run"):
        target_url("func:shopping_get_latest_order_url()", "http://r/")


# -- configs -----------------------------------------------------------------------------------
def test_problems_name_what_esopt_cannot_grade():
    assert configs.problems(config()) == []
    helper = config(eval_types=["program_html"], program_html=[
        {"url": "func:shopping_get_latest_order_url()", "locator": "document.title",
         "required_contents": {"must_include": ["x"]}},
        {"url": "__GITLAB__/m", "locator": "func:gitlab_get_project_memeber_role(__page__, 'a')",
         "required_contents": {"must_include": ["Guest"]}},
        {"url": "last", "locator": "", "required_contents": {"must_include": ["x"]}, "prep_actions": ["x"]}])
    found = configs.problems(helper)
    assert len(found) == 3 and "shopping_get_latest_order_url" in found[0] and "esopt runs no helpers" in found[1]
    assert "prep_actions" in found[2]
    assert configs.problems(config(eval_types=["db_match"]))[0].startswith("eval.eval_types must be")
    assert "reference_answers" in configs.problems(config(reference_answers={"regex": "x"}))[0]
    assert "url_match needs" in configs.problems(config(eval_types=["url_match"]))[0]
    assert "url_note" in configs.problems(config(eval_types=["url_match"], reference_url="x", url_note="?"))[0]


def test_needs_judge():
    assert not configs.needs_judge(config())
    assert configs.needs_judge(config(reference_answers={"fuzzy_match": ["x"]}))
    assert not configs.needs_judge(config(eval_types=["url_match"], reference_url="u",
                                          reference_answers={"fuzzy_match": ["x"]}))  # string_match not graded
    html = [{"url": "last", "locator": "", "required_contents": {"fuzzy_match": ["x"]}}]
    assert configs.needs_judge(config(eval_types=["program_html"], program_html=html))


def test_splits_follow_the_template_or_the_config():
    many = [{**config(k), "intent_template_id": k % 40} for k in range(400)]
    splits = [configs.split_of(c, c["task_id"]) for c in many]
    assert splits == [configs.split_of(c, c["task_id"]) for c in many]  # deterministic
    by_template = {}
    for c, s in zip(many, splits):
        by_template.setdefault(c["intent_template_id"], set()).add(s)
    assert all(len(s) == 1 for s in by_template.values())  # a template never straddles two splits
    assert set(splits) == {"train", "validation", "heldout"}
    assert configs.split_of({**config(), "split": "validation"}, 1) == "validation"
    with pytest.raises(ValueError, match="split 'test'"):
        configs.split_of({**config(), "split": "test"}, 1)


# -- namespaces and preflight ------------------------------------------------------------------------
@pytest.fixture
def task_file(tmp_path):
    tasks = [config(1), config(2, reference_answers={"fuzzy_match": ["x"]}),
             {**config(3), "require_login": True, "storage_state": "./.auth/shopping_state.json"},
             config(4, eval_types=["url_match"], reference_url="__SHOP__/cart")]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(tasks))
    return path


def test_file_namespace_ids_and_errors(task_file, tmp_path):
    from esopt.envs.browser.tasks import expand, namespace_of, task_split

    ids = expand([f"webarena-file:{task_file}"])
    assert ids == [f"webarena-file:{task_file.resolve()}#{k}" for k in (1, 2, 3, 4)]
    assert expand([f"webarena-file:{task_file}#2", ids[1]]) == [ids[1]]
    assert namespace_of(ids[0]) == "webarena-file" and namespace_of("webarenalite.4") == "webarenalite"
    assert task_split(ids[0]) == configs.split_of(config(1), 1)
    for bad, message in [(f"webarena-file:{task_file}#9", "no task '9'"), (f"webarena-file:{tmp_path}/no.json",
                                                                          "no such file"),
                         ("webarena-file:", "unknown BrowserGym task"), ("webarenalite", "unknown BrowserGym task")]:
        with pytest.raises(ValueError, match=message):
            expand([bad])
    broken = tmp_path / "broken.json"
    broken.write_text('[{"task_id": 1}, {"task_id": 1}]')
    with pytest.raises(ValueError, match="task_id 1 occurs twice"):
        expand([f"webarena-file:{broken}"])


def test_check_task_names_what_is_missing(task_file, monkeypatch, tmp_path):
    from esopt.envs.browser.webarena.namespaces import check_task

    monkeypatch.delenv("WA_SHOPPING", raising=False)
    monkeypatch.delenv("ESOPT_WEBARENA_AUTH", raising=False)
    ids = [f"webarena-file:{task_file.resolve()}#{k}" for k in (1, 2, 3, 4)]
    with pytest.raises(ValueError, match=r"#1: WA_SHOPPING is not set"):
        check_task(ids[0])
    monkeypatch.setenv("WA_SHOPPING", "http://shop.internal:7770")
    assert check_task(ids[0]) == ["shop.internal"]
    with pytest.raises(ValueError, match="#2: it grades with fuzzy_match, which needs an LLM judge"):
        check_task(ids[1])
    judge = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "ESOPT_TEST_NO_SUCH_KEY"}
    with pytest.raises(ValueError, match="ESOPT_TEST_NO_SUCH_KEY but that environment variable is not set"):
        check_task(ids[1], judge)
    assert check_task(ids[1], {**judge, "api_key_env": None}) == ["shop.internal"]
    with pytest.raises(ValueError, match="#3: it needs a login: set ESOPT_WEBARENA_AUTH"):
        check_task(ids[2])
    monkeypatch.setenv("ESOPT_WEBARENA_AUTH", str(tmp_path))
    with pytest.raises(ValueError, match="shopping_state.json does not exist"):
        check_task(ids[2])
    (tmp_path / "shopping_state.json").write_text('{"cookies": []}')
    assert check_task(ids[2]) == ["shop.internal"]
    with pytest.raises(ValueError, match="WA_SHOP is not set"):  # a placeholder of your own: __SHOP__
        check_task(ids[3])


def test_preflight_wants_the_sites_hosts_allowed(tmp_path, monkeypatch):
    pytest.importorskip("browsergym.core")
    from esopt.config import ConfigError, load_config
    from esopt.train.preflight import check_env

    tasks = [{**config(k), "split": split} for k, split in enumerate(("train", "validation", "heldout"))]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(tasks))
    fuzzy = tmp_path / "fuzzy.json"
    fuzzy.write_text(json.dumps(tasks + [{**config(3, reference_answers={"fuzzy_match": ["x"]}), "split": "train"}]))
    monkeypatch.setenv("WA_SHOPPING", "http://shop.internal:7770")

    def check(*overrides):
        # any executable stands in for chromium: preflight checks the path, it starts no browser
        check_env(load_config("configs/demo.yaml", ["env.id=browsergym", f"env.web.chromium={sys.executable}",
                                                     *overrides]).env)

    with pytest.raises(ConfigError, match=r"env.options.web.allowed_hosts lacks shop.internal, .*add it"):
        check(f"env.task=webarena-file:{plain}")
    check(f"env.task=webarena-file:{plain}", "env.web.allowed_hosts=[127.0.0.1,shop.internal]")
    with pytest.raises(ConfigError, match="#3: it grades with fuzzy_match, which needs an LLM judge"):
        check(f"env.task=webarena-file:{fuzzy}", "env.web.allowed_hosts=[shop.internal]")
    check(f"env.task=webarena-file:{fuzzy}", "env.web.allowed_hosts=[shop.internal]",
          "env.web.judge.base_url=http://127.0.0.1:8000/v1", "env.web.judge.model=judge-model")


# -- the Lite configs come from the package's data file, not its modules -----------------------------
@pytest.fixture
def fake_lite(tmp_path, monkeypatch):
    """A stand-in browsergym-webarenalite install: its record, its data file, and an __init__ that must not run."""
    root = tmp_path / "site"
    info = root / "browsergym_webarenalite-0.14.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: browsergym-webarenalite\nVersion: 0.14.3\n")
    package = root / "browsergym" / "webarenalite"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('esopt imported browsergym.webarenalite')\n")
    lite = [{**config(0), "old_task_id": 4}, {**config(1), "intent_template_id": 7, "old_task_id": 15}]
    (package / "test_webarena_lite.raw.json").write_text(json.dumps(lite))
    monkeypatch.syspath_prepend(str(root))
    configs.packaged.cache_clear()
    yield lite
    configs.packaged.cache_clear()


def test_lite_ids_come_from_the_package_data_without_importing_it(fake_lite):
    from esopt.envs.browser.tasks import expand, task_settings, task_split

    assert expand(["webarenalite.*"]) == ["webarenalite.4", "webarenalite.15"]
    kwargs, files = task_settings("webarenalite.15", {"base_url": "http://127.0.0.1:1/v1", "model": "m"})
    assert kwargs["config"]["intent_template_id"] == 7 and kwargs["name"] == "webarenalite.15" and files == ()
    assert kwargs["judge"]["model"] == "m"
    assert task_split("webarenalite.4") == configs.split_of(fake_lite[0], 4)
    with pytest.raises(ValueError, match="no task '3'"):
        expand(["webarenalite.3"])
    assert "browsergym.webarenalite" not in sys.modules


def test_missing_package_says_what_to_install(monkeypatch):
    from esopt.envs.browser.tasks import expand

    configs.packaged.cache_clear()
    monkeypatch.setitem(configs.PACKAGED, "webarena", configs.PackagedSource("esopt-no-such-dist", "x.json", "task_id"))
    wanted = (r"esopt-no-such-dist package, which is not installed; pip install --no-deps "
              r"browsergym-webarenalite==0.14.3 libwebarena==0.0.4 \(make install-webarena\)")
    with pytest.raises(ValueError, match=wanted):
        expand(["webarena.*"])
    configs.packaged.cache_clear()


# -- the judge client ---------------------------------------------------------------------------------
def test_judge_problems_and_unreachable_endpoint(monkeypatch):
    assert "not an http(s) URL" in Judge("localhost:8000", "m").problem()
    assert "model is empty" in Judge("http://127.0.0.1:9/v1", "").problem()
    monkeypatch.setenv("ESOPT_TEST_KEY", "k")
    assert Judge("http://127.0.0.1:9/v1", "m", "ESOPT_TEST_KEY").problem() is None
    with pytest.raises(JudgeError, match="unreachable"):
        Judge("http://127.0.0.1:9/v1", "m", timeout_s=2).same_answer("q", "a", "a")


# -- no network at import -------------------------------------------------------------------------------
def test_importing_does_no_network(task_file):
    script = textwrap.dedent(f"""
        import socket, sys
        def refuse(*a, **k):
            raise AssertionError("network used at import")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import esopt.envs.browser.tasks as wt
        from esopt.envs.browser.webarena import configs, episode, grade, judge, namespaces, preflight, scoring, sites
        assert wt.expand(["webarena-file:{task_file}"])
        assert not [m for m in sys.modules if m.startswith(("browsergym.webarena", "nltk", "webarena"))]
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_task_file_with_only_some_splits_runs_where_its_split_has_tasks(tmp_path, monkeypatch, capsys):
    """A file of one's own with held-out tasks only: evaluation passes preflight and plays them;
    training is refused in one line naming the empty split and how to fill it, before any folder."""
    pytest.importorskip("browsergym.core")
    from esopt.cli import main
    from esopt.config import load_config
    from esopt.envs.browser.tasks import WebTaskSet, expand
    from esopt.train.preflight import check_run_config

    only = tmp_path / "heldout.json"
    only.write_text(json.dumps([{**config(k), "split": "heldout"} for k in (1, 2)]))
    monkeypatch.setenv("WA_SHOPPING", "http://shop.internal:7770")
    overrides = ["env.id=browsergym", f"env.web.chromium={sys.executable}", f"env.task=webarena-file:{only}",
                 "env.web.allowed_hosts=[shop.internal]", "tasks.validation=0", "model=tiny-llama"]
    cfg = load_config("configs/demo.yaml", overrides)
    check_run_config(cfg, splits=("heldout",))  # what `esopt eval` checks: passes
    episodes = WebTaskSet(expand(cfg.env.options.task), 0).heldout(4)
    assert sorted({task.rpartition("#")[2] for task, _ in episodes}) == ["1", "2"]
    runs = tmp_path / "runs"
    assert main(["train", "configs/demo.yaml", *overrides, f"run.out_dir={runs}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no task in the train split" in err[0] and "`split: train`" in err[0], err
    assert not runs.exists()
    with pytest.raises(Exception, match="has no task in the validation split.*tasks.validation=0"):
        check_run_config(load_config("configs/demo.yaml", overrides + ["tasks.validation=2"]),
                         splits=("heldout", "validation"))
