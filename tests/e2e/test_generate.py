"""End-to-end tests of `cachegate generate` on the default model."""

import subprocess

from conftest import BIN, ROOT

MODEL = ROOT / "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"


def generate(*args, timeout=120):
    return subprocess.run([str(BIN), "generate", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def test_chat_greedy_knows_paris():
    r = generate("--model", str(MODEL), "--chat", "--prompt", "What is the capital of France?",
                 "--temperature", "0", "--max-tokens", "40")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "prompt: " in r.stderr and "tokens/s" in r.stderr
    assert "finish_reason: stop" in r.stderr


def test_greedy_is_deterministic_and_max_tokens_bounds_length():
    args = ("--model", str(MODEL), "--prompt", "Once upon a time", "--temperature", "0",
            "--max-tokens", "12")
    a, b = generate(*args), generate(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and a.stdout.strip()
    assert "generated: 12 tokens" in a.stderr
    assert "finish_reason: length" in a.stderr


def test_seed_makes_sampling_reproducible():
    args = ("--model", str(MODEL), "--prompt", "My favourite colour is", "--temperature", "1",
            "--max-tokens", "16")
    a = generate(*args, "--seed", "42")
    b = generate(*args, "--seed", "42")
    c = generate(*args, "--seed", "43")
    assert a.returncode == 0 and a.stdout == b.stdout
    assert a.stdout != c.stdout


def test_missing_model_is_one_clear_line():
    r = generate("--model", "/nonexistent/model.gguf", "--prompt", "hi")
    assert r.returncode == 1
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1
    assert "/nonexistent/model.gguf: No such file or directory" in lines[0]


def test_bad_model_file(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    r = generate("--model", str(bad), "--prompt", "hi")
    assert r.returncode == 1
    assert str(bad) in r.stderr and "count exceeds the file" in r.stderr


def test_a_directory_as_model_is_one_clear_line(tmp_path):
    r = generate("--model", str(tmp_path), "--prompt", "hi")
    assert r.returncode == 1
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "not a regular file (a directory)" in lines[0], r.stderr


def test_bad_arguments_are_usage_errors():
    """Out-of-range numbers and a --system without --chat (which would be ignored) are
    refused before the model loads, with status 2."""
    base = ("--model", str(MODEL), "--prompt", "hi")
    for extra, says in ((("--threads", "100000"), "engine.threads: 100000 is out of range"),
                        (("--threads", "-1"), "engine.threads: -1 is out of range"),
                        (("--max-tokens", "99999999999"),
                         "--max-tokens takes a whole number from 0 to 1048576 (got "
                         "'99999999999')"),
                        (("--max-tokens", "-3"), "--max-tokens takes a whole number"),
                        (("--seed", "99999999999999999999999"), "--seed takes a whole number"),
                        (("--seed", "-3"), "(got '-3')"),
                        (("--system", "Be brief."), "--system goes with --chat"),
                        (("--temperature", ""), "--temperature takes a number (got '')"),
                        (("--top-p", ""), "--top-p takes a number (got '')"),
                        (("--top-p", "1.5"), "top-p in [0, 1]"),
                        (("unquoted",), "unexpected argument 'unquoted'"),
                        (("--prompt", "again"), "--prompt is given twice"),
                        (("--chat", "--system", "a", "--system", "b"), "--system is given twice")):
        r = generate(*base, *extra)
        assert r.returncode == 2 and says in r.stderr, (extra, r.stderr)


def test_config_names_the_chat_format(tmp_path):
    import re
    conf = tmp_path / "c.conf"
    conf.write_text("[engine]\nchat_format = llama2\n")
    base = ("--model", str(MODEL), "--chat", "--prompt", "Hi", "--temperature", "0",
            "--max-tokens", "2")
    auto = generate(*base)
    named = generate("--config", str(conf), *base)
    assert auto.returncode == 0 and named.returncode == 0
    n_auto = int(re.search(r"prompt: (\d+) tokens", auto.stderr).group(1))
    n_named = int(re.search(r"prompt: (\d+) tokens", named.stderr).group(1))
    # ChatML with SmolLM2's default system prompt is far longer than "[INST] Hi [/INST]"
    assert n_named < n_auto


def test_output_that_cannot_be_written_fails():
    """A full disk (or a closed pipe) is a failure, not a silent success."""
    for cmd in (["generate", "--model", str(MODEL), "--prompt", "Once upon a time",
                 "--temperature", "0", "--max-tokens", "8"], ["embed", "hello"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([str(BIN), *cmd], stdout=full, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 1, cmd
        assert "cannot write the output" in r.stderr, r.stderr


def test_prompts_that_cannot_run_say_why():
    r = generate("--model", str(MODEL), "--prompt", "")
    assert r.returncode == 2 and "not empty" in r.stderr
    r = generate("--model", str(MODEL), "--prompt", "hello " * 9000)
    assert r.returncode == 1 and "the model's context is 8192" in r.stderr, r.stderr
    r = subprocess.run([str(BIN).encode(), b"generate", b"--model", str(MODEL).encode(),
                        b"--prompt", b"\xff"], capture_output=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1 and b"no text the model's vocabulary can encode" in r.stderr


def test_max_model_len_from_the_config_bounds_generate(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("[engine]\nmax_model_len = 40\n")
    r = generate("--model", str(MODEL), "--config", str(conf), "--prompt", "Once upon a time",
                 "--temperature", "0", "--max-tokens", "500")
    assert r.returncode == 0, r.stderr
    assert "prompt: 4 tokens" in r.stderr and "generated: 36 tokens" in r.stderr
    assert "finish_reason: length" in r.stderr
    r = generate("--model", str(MODEL), "--config", str(conf), "--prompt", "hello " * 60)
    assert r.returncode == 1 and "engine.max_model_len is 40" in r.stderr, r.stderr
