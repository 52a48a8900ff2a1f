"""gpubench watch's command line on a CPU: a command that cannot be started leaves nothing and says so in
one sentence, bad input is one sentence and exit 2, and --help names the watch."""

import pytest
from fakes import FakeSource
from watchfakes import _children_import_this_gpubench, options, run_cli

from gpubench.job import watchcmd as watch

FIXTURES = (_children_import_this_gpubench,)  # pytest finds it by its name in this module


def test_a_command_that_fails_to_start_leaves_nothing(tmp_path):
    bogus = tmp_path / "bogus"
    bogus.write_bytes(b"\x7fELF\x00 not really a program")
    bogus.chmod(0o755)
    with pytest.raises(watch.CannotStart) as err:
        watch.run(options(tmp_path / "run", [FakeSource()]), [str(bogus)])
    assert err.value.code == 126 and "could not be started" in str(err.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "make,code,message",
    [
        (lambda d: "no-such-command-here", 127, "no-such-command-here: command not found on PATH"),
        (lambda d: str(d), 126, "is a directory, not a command"),
        (lambda d: (d / "script.sh").write_text("echo hi") and str(d / "script.sh"), 126, "is not executable"),
    ],
)
def test_a_command_that_cannot_be_started_is_one_sentence_and_nothing_written(tmp_path, make, code, message):
    r = run_cli("watch", "--out", str(tmp_path / "run"), "--", make(tmp_path), "arg")
    assert r.returncode == code
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["watch"], "give the command to watch after --"),
        (["watch", "--duration", "5", "--", "true"], "--duration is for watching without a command"),
        (["watch", "--duration", "0.2"], "--duration must be longer than the 0.5 s"),
        (["watch", "--dtype", "int8", "--", "true"], "invalid choice: 'int8'"),
        (["watch", "--out", "/proc/gpubench-watch", "--", "true"], "lies under /proc"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args, message):
    r = run_cli(*args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_help_names_watch():
    out = run_cli("--help").stdout
    assert "gpubench watch -- python train.py" in out
    assert "CUDA_VISIBLE_DEVICES" in run_cli("watch", "--help").stdout
