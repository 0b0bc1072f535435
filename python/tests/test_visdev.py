"""The visdev module, each test in processes of its own: the module holds leases
and writes os.environ, as a training script's process would."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("VISDEV_BUILD", os.path.join(ROOT, "build"))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
MOCK = os.path.join(BUILD, "tests", "mock-nvml")


@pytest.fixture
def env(tmp_path):
    """A clean environment: a lease directory of the test's own, the four-GPU fixture."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("CUDA_", "VISDEV_", "NVIDIA_"))}
    e["PYTHONPATH"] = os.path.join(BUILD, "python", "lib")
    e["VISDEV_LEASE_DIR"] = str(tmp_path / "leases")
    e["VISDEV_FIXTURE"] = os.path.join(FIXTURES, "four.json")
    e["VISDEV_NVML_LIB"] = str(tmp_path / "no-such-libnvidia-ml.so.1")
    return e


def py(env, code, **kw):
    """Runs code in a new python; returns the finished process."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=60, **kw)


def start(env, code):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def hold(env, n=1):
    """A process that holds n GPUs until it is killed, once it holds them."""
    p = start(env, f"""
        import visdev, time
        lease = visdev.acquire(n={n})
        print("held", flush=True)
        time.sleep(60)
    """)
    assert p.stdout.readline().strip() == "held", p.stderr.read()
    return p


def leases(env):
    out = py(env, "import visdev, json; print(json.dumps([vars(l) for l in visdev.leases()]))")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def cli_leases(env):
    """What `visdev leases --json` says: the leases and the line."""
    out = subprocess.run([os.path.join(BUILD, "visdev"), "leases", "--json"], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def wait_for(what, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if what():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_acquire_writes_the_variable_and_holds_the_lease(env):
    out = py(env, """
        import os, visdev, json
        lease = visdev.acquire(n=2)
        print(json.dumps({"devices": [d["index"] for d in lease.devices], "env": lease.env,
                          "value": lease.cuda_visible_devices,
                          "os": [os.environ["CUDA_VISIBLE_DEVICES"], os.environ["CUDA_DEVICE_ORDER"]],
                          "c": os.getenv("CUDA_VISIBLE_DEVICES"),
                          "held": len(visdev.leases()),
                          "commands": [l.command for l in visdev.leases()]}))
    """)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert len(got["devices"]) == 2
    assert got["env"] == {"CUDA_VISIBLE_DEVICES": got["value"], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert got["os"] == [got["value"], "PCI_BUS_ID"]
    assert got["held"] == 2
    # the leases name the script, as `visdev leases` shows them
    assert got["commands"] == ["python -c", "python -c"]
    # the value round-trips: CUDA reads it as exactly the devices leased
    env2 = dict(env, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    back = py(env2, f"""
        import visdev
        print([d.index for d in visdev.resolve({got['value']!r}, order="pci").devices])
    """)
    assert back.stdout.strip() == str(got["devices"])
    # the process has ended: its leases with it
    assert leases(env) == []


def test_two_processes_at_once_never_get_the_same_gpu(env):
    code = """
        import visdev, sys, time
        lease = visdev.acquire(n=2, wait=30)
        print(",".join(d["uuid"] for d in lease.devices), flush=True)
        time.sleep(1.5)
    """
    procs = [start(env, code) for _ in range(2)]
    got = [p.communicate(timeout=60)[0].strip().split(",") for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(got[0]) | set(got[1])) == 4


def test_the_lease_ends_with_kill_9_and_with_a_with_block(env):
    p = hold(env)
    assert len(leases(env)) == 1
    p.kill()
    p.wait()
    assert leases(env) == []
    out = py(env, """
        import visdev
        with visdev.acquire() as lease:
            inside = len(visdev.leases())
        print(inside, len(visdev.leases()), lease.released)
    """)
    assert out.stdout.split() == ["1", "0", "True"]


def test_nofit_says_why_per_gpu_and_or_cpu_falls_back(env):
    out = py(env, """
        import visdev, json
        try:
            visdev.acquire(n=2, model="H100")
        except visdev.NoFitError as e:
            assert isinstance(e, visdev.Error)
            print(json.dumps({"message": str(e), "reasons": e.reasons}))
    """)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["message"].startswith("no GPU fits")
    assert [r["reason"] for r in got["reasons"] if r["index"] is not None] == ["model"] * 4
    assert all(r["why"].startswith(f"GPU {r['index']}: ") for r in got["reasons"] if r["index"] is not None)
    out = py(env, """
        import os, visdev, warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lease = visdev.acquire(model="H100", or_cpu=True)
        print(repr(os.environ["CUDA_VISIBLE_DEVICES"]), lease.devices, w[0].category.__name__)
    """)
    assert out.stdout.split() == ["''", "[]", "RuntimeWarning"]


def test_bad_arguments_are_value_errors_with_the_clis_words(env):
    out = py(env, """
        import visdev
        for kw in ({"min_free": "40"}, {"min_free": 40}, {"policy": "best"}, {"max_util": 300},
                   {"exclude": [-1]}, {"n": 0}):
            try:
                visdev.acquire(**kw)
            except ValueError as e:
                assert isinstance(e, visdev.Error) and isinstance(e, visdev.ArgumentError)
                print(e)
    """)
    lines = out.stdout.splitlines()
    assert len(lines) == 6, out.stderr
    assert lines[0] == "min_free: invalid size '40': a size needs its unit, such as 40G, 40GiB, 40960M or 40M"


def test_too_late_once_cuda_started_in_the_process(env):
    env = dict(env, VISDEV_CUDA_LIB=os.path.join(MOCK, "libcuda.so.1"),
               MOCK_NVML_FIXTURE=os.path.join(FIXTURES, "four.json"))
    code = """
        import ctypes, os, visdev
        cuda = ctypes.CDLL(os.environ["VISDEV_CUDA_LIB"], mode=ctypes.RTLD_GLOBAL)
        {init}
        try:
            visdev.acquire()
            print("acquired")
        except visdev.TooLateError as e:
            print("too late:", e)
    """
    # loaded but never initialised: still in time
    assert py(env, code.format(init="")).stdout.strip() == "acquired"
    out = py(env, code.format(init="assert cuda.cuInit(0) == 0"))
    assert out.stdout.startswith("too late: CUDA has already started in this process"), out.stderr


def test_too_late_when_torch_says_it_initialised_cuda(env, tmp_path):
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        "class cuda:\n    @staticmethod\n    def is_initialized():\n        return INIT\nINIT = True\n")
    env = dict(env, PYTHONPATH=env["PYTHONPATH"] + os.pathsep + str(fake))
    out = py(env, """
        import torch, visdev
        try:
            visdev.acquire()
        except visdev.TooLateError as e:
            print("too late:", e)
        torch.INIT = False
        print(visdev.acquire().cuda_visible_devices != "")
    """)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("too late: torch has already initialised CUDA"), out.stderr
    assert lines[1] == "True"


def test_a_wait_in_line_ends_with_keyboardinterrupt_and_leaves_nothing_held(env):
    holder = hold(env, 4)
    waiter = start(env, """
        import visdev
        try:
            visdev.acquire(wait=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """)
    wait_for(lambda: len(cli_leases(env)["line"]) == 1)
    waiter.send_signal(signal.SIGINT)
    assert waiter.communicate(timeout=30)[0].strip() == "interrupted"
    holder.kill()
    holder.wait()
    got = cli_leases(env)
    assert got["leases"] == [] and got["line"] == []


def test_acquire_from_a_process_with_threads(env):
    out = py(env, """
        import threading, time, visdev
        stop = False
        def spin():
            while not stop:
                sum(range(1000))
        threads = [threading.Thread(target=spin) for _ in range(4)]
        for t in threads:
            t.start()
        leases = [visdev.acquire() for _ in range(3)]
        stop = True
        for t in threads:
            t.join()
        print(len({l.cuda_visible_devices for l in leases}))
    """)
    assert out.stdout.strip() == "3", out.stderr


def test_with_threads_the_cuda_driver_is_asked_in_a_helper_not_a_forked_copy(env, tmp_path):
    # NVML (the stand-in), which has CUDA's fastest-first order asked of the driver, uncached
    env = dict(env, VISDEV_NVML_LIB=os.path.join(MOCK, "libnvidia-ml.so.1"),
               VISDEV_CUDA_LIB=os.path.join(MOCK, "libcuda.so.1"),
               MOCK_NVML_FIXTURE=os.path.join(FIXTURES, "mixed.json"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), MOCK_CUDA_LOG=str(tmp_path / "log"))
    del env["VISDEV_FIXTURE"]
    # found through sys.path, not PYTHONPATH: the helper must find it all the same
    lib = env.pop("PYTHONPATH")
    out = py(env, f"""
        import sys; sys.path.insert(0, {lib!r})
        import threading, time, visdev
        stop = False
        def spin():
            while not stop:
                sum(range(1000))
        threads = [threading.Thread(target=spin) for _ in range(4)]
        for t in threads:
            t.start()
        r = visdev.resolve("0", order="fastest")
        lease = visdev.acquire()
        stop = True
        for t in threads:
            t.join()
        print(r.devices[0].index, lease.cuda_visible_devices != "")
    """)
    assert out.returncode == 0, out.stderr
    # mixed.json: cuda_rank 0 is its GPU 2
    assert out.stdout.split() == ["2", "True"]
    callers = (tmp_path / "log").read_text().splitlines()
    assert callers and all("_cuda_helper" in c for c in callers), callers


def test_reading_devices_resolve_and_leases(env):
    out = py(env, """
        import json, visdev
        d = visdev.devices()
        r = visdev.resolve("0,9,1", order="pci")
        print(json.dumps([len(d), d[0].uuid, d[0].memory_total_mib, [x.index for x in r.devices], r.stop]))
        visdev.use_demo()
        print(visdev.devices()[2].name)
    """)
    lines = out.stdout.splitlines()
    assert json.loads(lines[0])[3:] == [[0], "out-of-range"], out.stderr
    assert lines[1] == "NVIDIA GeForce RTX 3090"


def test_devices_is_lists_model_key_for_key_and_value_for_value(env):
    for fixture in ("mig.json", "mixed.json"):
        h = dict(env, VISDEV_FIXTURE=os.path.join(FIXTURES, fixture))
        e = dict(h, CUDA_VISIBLE_DEVICES="1")
        holder = hold(h)
        out = py(e, """
            import json, visdev
            from types import SimpleNamespace
            def plain(o):
                if isinstance(o, SimpleNamespace):
                    return {k: plain(v) for k, v in vars(o).items()}
                return [plain(v) for v in o] if isinstance(o, list) else o
            print(json.dumps([plain(g) for g in visdev.devices()]))
        """)
        listed = subprocess.run([os.path.join(BUILD, "visdev"), "list", "--json"], env=e,
                                capture_output=True, text=True, check=True)
        holder.kill()
        holder.wait()
        assert out.returncode == 0, out.stderr
        got, want = json.loads(out.stdout), json.loads(listed.stdout)["gpus"]
        assert got == want
        assert sum(len(g["leases"]) + sum(len(m["leases"]) for m in g["mig"]) for g in got) == 1


def test_no_reference_leak_over_10000_devices_calls(env):
    out = py(env, """
        import sys, visdev
        for _ in range(100):
            visdev.devices()
        before = sys.getallocatedblocks()
        for _ in range(10000):
            visdev.devices()
        print(sys.getallocatedblocks() - before)
    """)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 100


def test_the_wheel_installs_into_a_fresh_venv_and_imports(env, tmp_path):
    wheels = [f for f in os.listdir(os.path.join(BUILD, "python")) if f.endswith(".whl")]
    assert wheels
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index",
                    os.path.join(BUILD, "python", wheels[0])], check=True)
    e = dict(env)
    del e["PYTHONPATH"]
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import visdev; print(visdev.__version__, len(visdev.devices()))"],
                         env=e, capture_output=True, text=True)
    assert out.stdout.split()[1] == "4", out.stderr


def test_the_example_setup_gpu_leases_or_falls_back_to_the_cpu(env, tmp_path):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "class _Module:\n    def to(self, device):\n        return self\n"
        "class nn:\n    @staticmethod\n    def Linear(*a):\n        return _Module()\n"
        "class cuda:\n    @staticmethod\n    def is_initialized():\n        return False\n")
    env = dict(env, PYTHONPATH=env["PYTHONPATH"] + os.pathsep + str(tmp_path / "fake"))
    example = os.path.join(ROOT, "examples", "train.py")
    out = subprocess.run([sys.executable, example, "20G"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("training on GPU ")
    assert out.stdout.splitlines()[1] == "model on cuda:0"
    out = subprocess.run([sys.executable, example, "100G"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.splitlines()[0] == "no GPU has 100G free: training on the CPU"
    assert "RuntimeWarning" in out.stderr


def test_a_second_acquire_stays_within_the_parents_restriction_and_its_order(env):
    # engine.json: CUDA's fastest-first order differs from PCI order; ordinal 3 is GPU 0
    e = dict(env, VISDEV_FIXTURE=os.path.join(FIXTURES, "engine.json"), CUDA_VISIBLE_DEVICES="3")
    out = py(e, """
        import visdev
        a = visdev.acquire(); first = a.devices[0]["index"]; a.release()
        b = visdev.acquire(); print(first, b.devices[0]["index"])
    """)
    assert out.stdout.split() == ["0", "0"], out.stderr


def test_a_lease_dropped_unreleased_lasts_as_long_as_the_process(env):
    out = py(env, """
        import gc, visdev
        def setup():
            visdev.acquire()   # the Lease object is dropped here
        setup(); gc.collect()
        kept = len(visdev.leases())
        lease = visdev.acquire(n=4, or_cpu=True)
        lease.release()
        print(kept, lease.released)
    """)
    assert out.stdout.split() == ["1", "True"], out.stderr


def test_arguments_that_are_not_what_they_should_be_are_argument_errors(env, tmp_path):
    out = py(env, f"""
        import pathlib, visdev
        for kw in ({{"n": 2**64 + 1}}, {{"n": "2"}}, {{"exclude": 5}}, {{"exclude": [2**32]}},
                   {{"wait": float("nan")}}, {{"model": "A" + chr(0)}}, {{"model": chr(0xdcff)}}):
            try:
                visdev.acquire(**kw)
                print("accepted", kw)
            except visdev.ArgumentError:
                print("refused")
        try:
            visdev.use_fixture("{tmp_path}/none.json")
        except visdev.Error as e:
            print("refused")
        visdev.use_fixture(pathlib.Path("{FIXTURES}/eight.json"))
        print(len(visdev.devices()))
    """)
    assert out.stdout.split() == ["refused"] * 8 + ["8"], out.stdout + out.stderr


def test_resolve_none_is_the_environment_and_devices_warns_when_leases_are_unknown(env, tmp_path):
    unsafe = tmp_path / "open"
    unsafe.mkdir(mode=0o777)
    unsafe.chmod(0o777)
    e = dict(env, CUDA_VISIBLE_DEVICES="1", VISDEV_LEASE_DIR=str(unsafe))
    out = py(e, """
        import visdev, warnings
        print(len(visdev.resolve().devices), len(visdev.resolve(None).devices), len(visdev.resolve("").devices))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            visdev.devices()
        print(w[0].category.__name__, str(w[0].message).startswith("leases unknown"))
    """)
    assert out.stdout.split() == ["1", "1", "0", "RuntimeWarning", "True"], out.stderr


def test_ctrl_c_while_the_allocation_lock_is_awaited_is_a_keyboardinterrupt(env, tmp_path):
    py(env, "import visdev; visdev.leases()")  # the lease directory, made
    lock = os.path.join(env["VISDEV_LEASE_DIR"], ".alloc.lock")
    holder = subprocess.Popen(["flock", lock, "sleep", "30"])
    try:
        p = start(env, """
            import visdev
            print("start", flush=True)
            try:
                visdev.acquire(wait=20)
            except visdev.Error as e:
                print("visdev.Error", e)
            except KeyboardInterrupt:
                print("interrupted")
        """)
        assert p.stdout.readline().strip() == "start"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        assert p.communicate(timeout=30)[0].strip() == "interrupted"
    finally:
        holder.kill()
        holder.wait()
