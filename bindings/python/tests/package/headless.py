"""Headless Chromium driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: commands on fd 3, replies on fd 4, each message
JSON ended by a NUL byte), with the standard library only. Tests click,
drag, hover and measure a page the way a user's browser does: input events
go through Chromium's input pipeline, not through synthetic DOM events."""
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-extensions", "--remote-debugging-pipe"]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One Chromium process, one page. Use as a context manager."""

    def __init__(self, width=1500, height=900, timeout=60):
        self.width, self.height, self.timeout = width, height, timeout
        self.next_id, self.buf, self.session = 0, b"", None

    def __enter__(self):
        exe = chromium()
        if exe is None:
            import pytest
            pytest.skip("chromium is not installed (make deps installs it)")
        self.profile = tempfile.mkdtemp(prefix="pn-chromium-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def fds():  # the protocol's fixed numbers, whatever os.pipe gave
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3, inheritable=True)
            os.dup2(b, 4, inheritable=True)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, pass_fds=(3, 4))  # and no other descriptor of ours
        os.close(to_child_r)
        os.close(from_child_w)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1,
                   "mobile": False})
        self.call("Page.enable")
        return self

    def __exit__(self, *exc):
        try:
            self.call("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_child)
        os.close(self.from_child)
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session is None and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_child], [], [], left)[0]:
                raise TimeoutError(f"{method}: no reply from Chromium in {self.timeout} s")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError(f"{method}: Chromium exited")
            self.buf += chunk

    def js(self, expr):
        """The value of a JS expression (promises awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, timeout=None):
        """Polls until expr is truthy; returns its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            v = self.js(expr)
            if v:
                return v
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expr}")
            time.sleep(0.05)

    def open(self, url):
        """Loads url and waits for the report page's script to finish."""
        self.call("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete' && document.body && "
                  "document.body.dataset.ready === '1'")
        return self

    def settle(self):
        """Waits for two animation frames (the page draws in one)."""
        self.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    def center(self, selector):
        box = self.js(f"(function () {{ var e = document.querySelector({json.dumps(selector)});"
                      " if (!e) return null; e.scrollIntoView({block: 'center'});"
                      " var b = e.getBoundingClientRect();"
                      " return [b.left + b.width / 2, b.top + b.height / 2]; })()")
        assert box, f"no element {selector}"
        return box

    def mouse(self, kind, x, y, buttons=0, modifiers=0, button="none"):
        self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": button,
                                               "buttons": buttons, "clickCount": 1,
                                               "modifiers": modifiers})

    def click_at(self, x, y, modifiers=0):
        self.mouse("mouseMoved", x, y, modifiers=modifiers)
        self.mouse("mousePressed", x, y, 1, modifiers, "left")
        self.mouse("mouseReleased", x, y, 0, modifiers, "left")
        self.settle()

    def click(self, selector, modifiers=0):
        self.click_at(*self.center(selector), modifiers=modifiers)

    def drag(self, x0, y0, x1, y1, steps=8):
        self.mouse("mouseMoved", x0, y0)
        self.mouse("mousePressed", x0, y0, 1, 0, "left")
        for k in range(1, steps + 1):
            self.mouse("mouseMoved", x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps, 1)
        self.mouse("mouseReleased", x1, y1, 0, 0, "left")
        self.settle()

    def screenshot(self, path):
        import base64
        data = self.call("Page.captureScreenshot", {"format": "png",
                                                    "captureBeyondViewport": False})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
