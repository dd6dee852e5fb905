import json

import numpy as np
import pytest

from assistant.core.retrieve import BM25Retriever, DenseRetriever, HybridRetriever
from assistant.errors import AssistError, UsageError
from assistant.indexing.index import Index, index_bank, index_repo
from assistant.indexing.sources import open_source
from assistant.pipeline.registry import make_retriever

from .conftest import git


def test_index_repo_then_incremental_reindex(scratch_repo, encoder):
    index, stats = index_repo(scratch_repo, encoder)
    assert sorted(e.name for e in index.examples) == ["cube_all", "is_even", "word_count"]
    assert (stats.files, stats.files_parsed, stats.embedded, stats.reused) == (2, 2, 3, 0)
    assert (scratch_repo / ".assist" / "index" / "meta.json").exists()
    assert git(scratch_repo, "status", "--porcelain") == ""  # .assist/ ignores itself

    # Change one file: only it is re-parsed, and only its new function is embedded.
    words = scratch_repo / "text" / "words.py"
    words.write_text(words.read_text() + '\n\ndef shout(s):\n    """Upper-case a string."""\n    return s.upper()\n')
    index, stats = index_repo(scratch_repo / "text", encoder)  # from a subfolder: finds the repo top
    assert (stats.files_parsed, stats.embedded, stats.reused, stats.examples) == (1, 1, 3, 4)

    # Nothing changed: nothing parsed or embedded; a deleted file drops its functions.
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_parsed, stats.embedded) == (0, 0)
    (scratch_repo / "mathutils.py").unlink()
    index, stats = index_repo(scratch_repo, encoder)
    assert sorted(e.name for e in index.examples) == ["shout", "word_count"]
    loaded = Index.load(scratch_repo / ".assist" / "index")
    assert [e.name for e in loaded.examples] == [e.name for e in index.examples]
    assert loaded.vectors.shape == (2, encoder.dim)


def test_index_repo_keeps_20_line_fragments_of_every_file_beside_the_functions(scratch_repo, encoder):
    from assistant.indexing.index import load_fragments

    _, stats = index_repo(scratch_repo, encoder)
    fragments = load_fragments(scratch_repo / ".assist" / "index")
    assert fragments is not None and stats.fragments == len(fragments) == 2  # two short files, one window each
    assert {(f.path, f.start_line, f.kind) for f in fragments.examples} == {
        ("mathutils.py", 1, "fragment"),
        ("text/words.py", 1, "fragment"),
    }
    assert fragments.vectors.shape == (2, encoder.dim)
    hits = DenseRetriever(fragments, encoder).search("def cube_all(values): return [v ** 3 for v in values]", 1)
    assert hits[0].example.path == "mathutils.py"

    # Incremental by blob: a changed file's windows are split again, and only the new text is embedded.
    words = scratch_repo / "text" / "words.py"
    words.write_text(words.read_text() + "\n" * 20 + "TAIL = 1\n")
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_parsed, stats.fragments, stats.fragments_embedded) == (1, 3, 2)
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_parsed, stats.fragments_embedded) == (0, 0)


def test_not_a_repo(tmp_path, encoder):
    with pytest.raises(UsageError, match="is not inside a git repository"):
        index_repo(tmp_path, encoder)


def test_failed_save_keeps_previous_index(scratch_repo, encoder, monkeypatch):
    index_repo(scratch_repo, encoder)
    before = (scratch_repo / ".assist" / "index" / "examples.jsonl").read_text()
    (scratch_repo / "new.py").write_text('def f():\n    """Do a thing."""\n')
    git(scratch_repo, "add", "new.py")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("faiss.write_index", boom)
    with pytest.raises(AssistError, match=r"cannot write the index .*: disk full; the index there before is unchanged"):
        index_repo(scratch_repo, encoder)
    assert (scratch_repo / ".assist" / "index" / "examples.jsonl").read_text() == before
    # No staging folder left behind; the lock file that serializes writers stays (it must outlive the swaps).
    assert sorted(p.name for p in (scratch_repo / ".assist").iterdir()) == [
        ".gitignore",
        "fragments",
        "fragments.lock",
        "index",
        "index.lock",
    ]


def test_retrievers_find_the_relevant_function(scratch_repo, encoder):
    index, _ = index_repo(scratch_repo, encoder)
    query = "cube every number in a list"
    for retriever in (
        BM25Retriever(index),
        DenseRetriever(index, encoder),
        HybridRetriever(BM25Retriever(index), DenseRetriever(index, encoder)),
    ):
        hits = retriever.search(query, 2)
        assert hits[0].example.name == "cube_all", retriever.name
        assert hits[0].why
    hits = make_retriever("dense", index, encoder).search(query, 2, exclude=lambda e: e.name == "cube_all")
    assert "cube_all" not in [h.example.name for h in hits]
    with pytest.raises(UsageError, match="unknown retriever"):
        make_retriever("magic", index, encoder)


def test_bank_index_is_reused_and_rebuilt_on_change(tmp_path, encoder):
    bank = tmp_path / "bank.jsonl"
    rows = [{"requirement": f"task number {i}", "code": f"def f{i}():\n    return {i}"} for i in range(3)]
    bank.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    _, stats = index_bank(bank, encoder)
    assert (stats.examples, stats.embedded) == (3, 3)
    _, stats = index_bank(bank, encoder)
    assert (stats.embedded, stats.reused) == (0, 3)
    bank.write_text(bank.read_text() + json.dumps({"requirement": "a new task", "code": "x = 1"}) + "\n")
    _, stats = index_bank(bank, encoder)
    assert (stats.examples, stats.embedded, stats.reused) == (4, 1, 3)


def test_source_falls_back_to_default_bank_then_uses_repo_index(scratch_repo, encoder):
    source = open_source(encoder, start=scratch_repo)
    assert source.kind == "default" and len(source.index) > 500 and "run `assist index`" in source.description
    index_repo(scratch_repo, encoder)
    source = open_source(encoder, start=scratch_repo)
    assert source.kind == "repo" and len(source.index) == 3 and source.root == scratch_repo


def test_dot_scores_match_numpy_for_any_float_dtype() -> None:
    from assistant.backends.encoder import dot_scores

    rng = np.random.default_rng(0)
    pool = rng.standard_normal((50, 8))
    vector = rng.standard_normal(8).astype(np.float32)
    scores = dot_scores(pool, vector)  # a float64 pool is scored in float32, like the encoder's vectors
    assert scores.dtype == np.float32 and scores.shape == (50,)
    np.testing.assert_allclose(scores, pool @ vector, rtol=1e-5, atol=1e-5)
    assert int(np.argmax(scores)) == int(np.argmax(pool @ vector))


def test_dense_search_of_one_query_matches_faiss_and_keeps_its_thread_setting(tmp_path, encoder) -> None:
    import faiss

    bank = tmp_path / "bank.jsonl"
    rows = [
        {"requirement": f"task {i}: {word}", "code": f"def f{i}():\n    return {i}\n"}
        for i, word in enumerate(
            ["sort a list", "reverse a string", "sum of squares", "parse a date", "merge two dicts"]
        )
    ]
    bank.write_text("".join(json.dumps(row) + "\n" for row in rows))
    index = index_bank(bank, encoder)[0]
    query = encoder.encode(["reverse the characters of a string"])
    before = faiss.omp_get_max_threads()
    scores, found = index.dense_search(query, 3)
    expected_scores, expected_rows = index.dense.search(query, 3)
    assert found.tolist() == expected_rows.tolist() and found[0][0] == 1
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-6)
    assert faiss.omp_get_max_threads() == before


def test_a_clones_own_assist_folder_is_never_written_through(scratch_repo, encoder, tmp_path):
    from assistant.indexing.index import load_repo_index
    from assistant.methods.artifacts import artifact_dir
    from assistant.ui.session import Session

    assert load_repo_index(scratch_repo) is None  # looking for an index writes nothing
    assert not (scratch_repo / ".assist").exists()
    # The index's source is the repo itself, whatever a meta.json (a file a repo can ship) says.
    index_repo(scratch_repo, encoder)
    meta_path = scratch_repo / ".assist" / "index" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "source": {"kind": "repo", "path": str(tmp_path / "elsewhere")}}))
    assert artifact_dir(load_repo_index(scratch_repo), "lail") == scratch_repo / ".assist" / "retrievers" / "lail"
    # A history file that is a link (the user's or not) is neither appended to nor read back.
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    history = scratch_repo / ".assist" / "history.jsonl"
    history.symlink_to(outside)
    session = Session(scratch_repo, encoder=encoder)
    session.record("generate")
    assert outside.read_text() == "mine\n" and session.history() == []
    # One the repo ships (tracked by git), or a `.assist` that is itself a link: a one-line refusal.
    git(scratch_repo, "add", "-f", ".assist/history.jsonl")
    with pytest.raises(UsageError, match=r"history.jsonl is a symlink the repo ships; assist writes through no link"):
        index_repo(scratch_repo, encoder)
    git(scratch_repo, "rm", "-q", "--cached", ".assist/history.jsonl")
    history.unlink()
    (scratch_repo / ".assist").rename(tmp_path / "moved")
    (scratch_repo / ".assist").symlink_to(tmp_path / "moved")
    assert open_source(encoder, start=scratch_repo).kind == "repo"  # the user's own link: followed
    git(scratch_repo, "add", "-f", ".assist")
    with pytest.raises(UsageError, match=r"\.assist is a symlink the repo ships"):
        open_source(encoder, start=scratch_repo)
    from assistant.ui.doctor import index_checks

    (check,) = index_checks(scratch_repo)
    assert check.ok is False and "git rm --cached" in check.fix
    assert outside.read_text() == "mine\n"


def test_dense_search_still_returns_k_when_exclusions_cut_deeper_than_its_first_ask(tmp_path, encoder) -> None:
    # A leak control can drop a whole file: here the 40 string examples, every one nearer the query than the
    # 20 others. The first faiss ask (k + 16 rows) holds only excluded rows; the retriever must ask again.
    bank = tmp_path / "bank.jsonl"
    rows = [{"requirement": f"reverse the characters of string number {i}", "code": f"s{i} = 1\n"} for i in range(40)]
    rows += [{"requirement": f"open database connection pool {i}", "code": f"d{i} = 1\n"} for i in range(20)]
    bank.write_text("".join(json.dumps(row) + "\n" for row in rows))
    index = index_bank(bank, encoder)[0]
    hits = DenseRetriever(index, encoder).search(
        "reverse a string", 4, exclude=lambda e: e.requirement.startswith("reverse")
    )
    assert len(hits) == 4 and all(h.example.requirement.startswith("open database") for h in hits)
    everything = DenseRetriever(index, encoder).search("reverse a string", 100)
    assert len(everything) == 60  # asks for more than the index holds: all of it, once


def test_files_are_read_again_when_extraction_changed_and_odd_names_and_codings_are_handled(scratch_repo, encoder):
    import os

    index_repo(scratch_repo, encoder)
    for folder in ("index", "fragments"):  # as an older assist, with other extraction code, left them
        path = scratch_repo / ".assist" / folder / "meta.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "extraction": "older"}))
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_parsed, stats.embedded, stats.fragments_embedded) == (2, 0, 0)  # read again, vectors kept
    _, stats = index_repo(scratch_repo, encoder)
    assert stats.files_parsed == 0

    # A tracked name that is not UTF-8 is skipped and counted; a latin-1 file is read in the coding it declares.
    (scratch_repo / os.fsdecode(b"caf\xe9.py")).write_text("def odd():\n    return 1\n")
    (scratch_repo / "old.py").write_bytes(
        b'# -*- coding: latin-1 -*-\ndef quote():\n    """Say d\xe9j\xe0 vu."""\n    return 1\n'
    )
    git(scratch_repo, "add", ".")
    index, stats = index_repo(scratch_repo, encoder)
    assert stats.files_skipped == 1 and "odd" not in {e.name for e in index.examples}
    assert {e.name: e.requirement for e in index.examples}["quote"] == "Say déjà vu."


def test_an_index_a_killed_writer_moved_aside_is_put_back(scratch_repo, encoder):
    from assistant.indexing.index import load_repo_index

    index_repo(scratch_repo, encoder)
    folder = scratch_repo / ".assist" / "index"
    folder.rename(folder.with_name("index.old-99999"))  # killed between its two renames
    index = load_repo_index(scratch_repo)
    assert index is not None and sorted(e.name for e in index.examples) == ["cube_all", "is_even", "word_count"]
    assert (folder / "meta.json").exists() and not folder.with_name("index.old-99999").exists()


def test_a_read_is_not_mixed_with_a_folder_swapped_in_meanwhile(scratch_repo, encoder, monkeypatch):
    import assistant.indexing.index as module

    index_repo(scratch_repo, encoder)
    folder = scratch_repo / ".assist" / "index"
    other = scratch_repo / "other-index"
    Index.load(folder).save(other)
    # The other index: same count, rows in another order (what a rename does to a real one).
    rows = json.loads("[" + ",".join((other / "examples.jsonl").read_text().splitlines()) + "]")
    (other / "examples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in reversed(rows)))
    real = module._read_meta

    def swapped_in(text):  # a writer swaps its folder in right after meta.json was read
        folder.rename(folder.with_name("index.old-1"))
        other.rename(folder)
        return real(text)

    monkeypatch.setattr(module, "_read_meta", swapped_in)
    loaded = Index.load(folder)
    assert [e.name for e in loaded.examples] == [row["name"] for row in rows]  # all of the first folder's


def _cli_index(root, encoder, monkeypatch) -> str:
    """`assist index ROOT`'s output, run in-process with the session's encoder."""
    from typer.testing import CliRunner

    import assistant.pipeline.pipeline
    from assistant.ui.cli import app

    monkeypatch.setattr(assistant.pipeline.pipeline, "load_encoder", lambda *a, **k: encoder)
    result = CliRunner().invoke(app, ["index", str(root)])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


EMPTY_NOTE = "the repo's index holds no functions; retrieving from the default bank"


def test_an_index_of_no_functions_falls_back_to_the_default_bank_and_says_so(tmp_path, encoder, monkeypatch):
    from assistant.indexing import sources
    from assistant.ui.doctor import index_checks

    from .conftest import commit_repo

    root = commit_repo(tmp_path / "repo", {"README.md": "# no Python here yet\n"})
    bank = tmp_path / "bank.jsonl"  # the default bank, small: its 722 examples are not embedded for this test
    bank.write_text(json.dumps({"requirement": "add two numbers", "code": "def add(a, b):\n    return a + b\n"}) + "\n")
    monkeypatch.setattr(sources, "default_bank", lambda: bank)

    output = _cli_index(root, encoder, monkeypatch)
    assert "Indexed 0 functions from 0 files" in output and EMPTY_NOTE in output, output
    assert output.count(EMPTY_NOTE) == 1
    source = open_source(encoder, start=root)
    assert (source.kind, len(source.index), source.root) == ("default", 1, root)
    assert "the repo's index holds no functions" in source.description
    (check,) = index_checks(root)
    assert EMPTY_NOTE in check.detail, check

    # A script with no function: its fragments are the repo's own, but there are still no demonstrations in it.
    (root / "script.py").write_text('print("hello")\n')
    output = _cli_index(root, encoder, monkeypatch)
    assert "holds no functions, only 20-line fragments: generate finds no demonstrations in it" in output, output
    assert open_source(encoder, start=root).kind == "repo"
    (check,) = index_checks(root)
    assert check.ok is True and "no demonstrations" in check.detail, check

    # A first function (not yet committed): the repo's own index, and nothing more said.
    (root / "util.py").write_text('def halve(x):\n    """Half of x."""\n    return x / 2\n')
    git(root, "add", "util.py")
    assert EMPTY_NOTE not in _cli_index(root, encoder, monkeypatch)
    source = open_source(encoder, start=root)
    assert (source.kind, [e.name for e in source.index.examples]) == ("repo", ["halve"])
    (check,) = index_checks(root)
    assert check.ok is True and check.detail.endswith("up to date"), check


def test_untracked_files_are_indexed_and_ignored_ones_are_not(scratch_repo, encoder, monkeypatch):
    from assistant.ui.doctor import index_checks

    index_repo(scratch_repo, encoder)
    fresh = 'def fresh_start(n):\n    """Count down from n."""\n    return list(range(n, 0, -1))\n'
    (scratch_repo / "src").mkdir()
    (scratch_repo / "src" / "fresh.py").write_text(fresh)  # just written, not yet `git add`ed
    (scratch_repo / ".gitignore").write_text("build/\n.venv/\n")
    for ignored in ("build/generated.py", ".venv/lib/site.py"):
        (scratch_repo / ignored).parent.mkdir(parents=True)
        (scratch_repo / ignored).write_text(fresh.replace("fresh_start", "ignored_one"))
    # A virtual environment git does not ignore (an older `python -m venv venv` writes no .gitignore): left out.
    (scratch_repo / "venv" / "lib").mkdir(parents=True)
    (scratch_repo / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (scratch_repo / "venv" / "lib" / "vendored.py").write_text(fresh.replace("fresh_start", "vendored"))

    index, stats = index_repo(scratch_repo, encoder)
    assert sorted(e.name for e in index.examples) == ["cube_all", "fresh_start", "is_even", "word_count"]
    assert (stats.files, stats.files_untracked, stats.files_parsed, stats.embedded) == (3, 1, 1, 1)
    assert stats.untracked_left_out == ["venv/lib/vendored.py"]
    (check,) = index_checks(scratch_repo)
    assert check.ok is True and "up to date" in check.detail, check

    # Hashed as tracked files are: unchanged, it is reused; `git add` changes nothing; an edit is seen.
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_parsed, stats.embedded, stats.reused) == (0, 0, 4)
    git(scratch_repo, "add", "src/fresh.py")
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_parsed, stats.files_untracked, stats.embedded) == (0, 0, 0)
    (scratch_repo / "extra.py").write_text('def extra():\n    """One more."""\n    return 1\n')
    (check,) = index_checks(scratch_repo)
    assert check.ok is None and "1 file changed" in check.detail
    output = _cli_index(scratch_repo, encoder, monkeypatch)
    assert "Indexed 5 functions from 4 files (1 untracked)" in output, output
    assert "left out 1 untracked file(s) inside a virtual environment (venv/)" in output, output


def test_files_that_do_not_parse_are_named_and_still_counted_by_incremental_runs(scratch_repo, encoder, monkeypatch):
    broken = [f"pkg/broken{i}.py" for i in range(5)]
    for rel in broken:
        (scratch_repo / rel).parent.mkdir(exist_ok=True)
        (scratch_repo / rel).write_text("def broken(:\n    return 1\n")
    git(scratch_repo, "add", "pkg")
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_unparsed, stats.unparsed_files) == (5, broken)

    # Nothing changed: nothing parsed again, and the five are still reported.
    _, stats = index_repo(scratch_repo, encoder)
    assert (stats.files_parsed, stats.files_unparsed, stats.unparsed_files) == (0, 5, broken)
    (scratch_repo / broken[0]).write_text('def fixed():\n    """Fixed now."""\n    return 1\n')
    output = _cli_index(scratch_repo, encoder, monkeypatch)
    assert "parsed 1 changed file" in output, output
    named = "skipped 4 file(s) that do not parse: pkg/broken1.py, pkg/broken2.py, pkg/broken3.py and 1 more"
    assert named in output, output
    output = _cli_index(scratch_repo, encoder, monkeypatch)
    assert "parsed 0 changed files" in output and "skipped 4 file(s) that do not parse: pkg/broken1.py" in output


def test_a_git_listing_that_times_out_is_a_one_line_error(tmp_path, monkeypatch):
    """A huge untracked tree git cannot list in time: a UsageError that says what to do, not a traceback."""
    import subprocess

    from assistant.indexing import files

    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], 120)

    monkeypatch.setattr(files.subprocess, "run", slow)
    with pytest.raises(UsageError, match=r"git took over 120 s to list the untracked files of .*; \.gitignore its"):
        files.untracked_files(tmp_path)
