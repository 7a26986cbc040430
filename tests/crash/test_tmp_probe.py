import os, subprocess, sys, time
def test_x():
    for i in range(3):
        t=time.monotonic(); subprocess.run([sys.executable, "-X", "importtime", "-c", "import desktop_agent.worker.compose, desktop_agent.cli"], capture_output=True); print("imp", time.monotonic()-t)
    print({k:v for k,v in os.environ.items() if "PY" in k or "DESK" in k})
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import desktop_agent.worker.compose, desktop_agent.cli"], capture_output=True, text=True)
    open("/tmp/cx/imp_pytest.txt","w").write(r.stderr)
