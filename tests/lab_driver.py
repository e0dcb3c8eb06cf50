"""Drive a live JupyterLab, started as `python course.py lab` starts it, in headless Chromium, offline.

Chromium is driven through the Chrome DevTools Protocol over a pipe (``--remote-debugging-pipe``: commands on its
file descriptor 3, replies and events on 4, one JSON message per NUL-terminated chunk), so nothing but Chromium and
the standard library is needed. Every network request of the browser is refused except those to the JupyterLab
server on this machine. JupyterLab exposes its application object to the page (``window.jupyterapp``,
``--LabApp.expose_app_in_browser``) so that the driver can choose and run cells as the menus do.

As a script (a maintainer's check, with screenshots to look at)::

    python tests/lab_driver.py en/03 --out /tmp/live     # or es/09, en/08: open the notebook, run the cells above
                                                          # the live cell and the live cell, move a slider
                                                          # (--slider N --to 0.3), save before/after screenshots
    python tests/lab_driver.py es/03 --rise               # the same, the slider moved in RISE's live slides
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


class DevTools:
    """One headless Chromium and one page in it, driven over the DevTools pipe."""

    def __init__(self, log: Path, width: int = 1280, height: int = 900):
        to_browser = os.pipe()
        from_browser = os.pipe()
        # above the descriptors the child must end up with (3 and 4), so that placing one cannot close another
        self._child_in = fcntl.fcntl(to_browser[0], fcntl.F_DUPFD, 10)
        self._child_out = fcntl.fcntl(from_browser[1], fcntl.F_DUPFD, 10)
        os.close(to_browser[0])
        os.close(from_browser[1])
        self._write, self._read = to_browser[1], from_browser[0]
        child_in, child_out = self._child_in, self._child_out

        def place():  # in the child, before exec: the pipe's ends at 3 and 4
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self._profile = tempfile.TemporaryDirectory()
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # only the server on this machine
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            preexec_fn=place,
            pass_fds=(3, 4),
        )
        os.close(self._child_in)
        os.close(self._child_out)
        self._next = 0
        self._replies: dict[int, queue.Queue] = {}
        self.console: list[str] = []  # the page's console messages and uncaught exceptions, in order
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._read, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        box = self._replies.get(message["id"])
                    if box is not None:
                        box.put(message)
                elif message.get("method") == "Runtime.consoleAPICalled":
                    args = message["params"].get("args", [])
                    text = " ".join(str(a.get("value", a.get("description", ""))) for a in args)
                    self.console.append(f"{message['params'].get('type')}: {text}")
                elif message.get("method") == "Runtime.exceptionThrown":
                    details = message["params"]["exceptionDetails"]
                    self.console.append(f"exception: {details.get('exception', {}).get('description', details)}")

    def call(self, method: str, params: dict | None = None, session: bool = False, timeout: float = 60) -> dict:
        with self._lock:
            self._next += 1
            number = self._next
            box = self._replies[number] = queue.Queue()
        message = {"id": number, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        try:
            reply = box.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"Chromium did not answer {method} within {timeout} s") from None
        finally:
            with self._lock:
                self._replies.pop(number, None)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def evaluate(self, expression: str, timeout: float = 60):
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=True,
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("exception", {}).get("description", result))
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 120, what: str = ""):
        """Poll a JavaScript expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.25)
        raise TimeoutError(f"waited {timeout} s for {what or expression}")

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, session=True)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 8) -> None:
        """Press the mouse at ``start``, move it to ``end`` and let go, as a hand on a slider does."""

        def mouse(kind: str, x: float, y: float, buttons: int) -> None:
            params = {"type": kind, "x": x, "y": y, "button": "left", "buttons": buttons, "clickCount": 1}
            self.call("Input.dispatchMouseEvent", params, session=True)

        mouse("mouseMoved", *start, 0)
        mouse("mousePressed", *start, 1)
        for k in range(1, steps + 1):
            mouse("mouseMoved", start[0] + (end[0] - start[0]) * k / steps, start[1], 1)
        mouse("mouseReleased", *end, 0)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._write, self._read):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        self._profile.cleanup()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def course_lab(tmp: Path, notebooks: list[Path]):
    """JupyterLab as `python course.py lab` starts it (its command and settings), on copies of ``notebooks`` in
    ``tmp/notebooks/<lang>/`` (the repository's own stay untouched: a kernel's outputs are never saved over them).
    Yields (base URL, token)."""
    import urllib.request

    sys.path.insert(0, str(ROOT))
    import course

    for nb in notebooks:
        target = tmp / "notebooks" / nb.parent.name / nb.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(nb, target)
    course.write_lab_settings(Path(sys.prefix))
    port, token = free_port(), secrets.token_hex(16)
    args = course.lab_command(
        Path(sys.executable),
        [
            "--no-browser",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            "--LabApp.expose_app_in_browser=True",
        ],
    )
    env = dict(os.environ)
    for var, sub in [
        ("JUPYTER_RUNTIME_DIR", "run"),
        ("JUPYTERLAB_SETTINGS_DIR", "user-settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
    ]:
        env[var] = str(tmp / sub)
    log = (tmp / "server.log").open("w")
    server = subprocess.Popen(args, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError((tmp / "server.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        yield base, token
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


# The JavaScript that finds cells and runs them as JupyterLab's "Run" menu does.
PANEL = "jupyterapp.shell.currentWidget"
KERNEL_IDLE = f"{PANEL}?.sessionContext?.session?.kernel?.status === 'idle'"


def cell_index(marker: str) -> str:
    return f"{PANEL}.content.widgets.findIndex(c => c.model.sharedModel.getSource().includes({json.dumps(marker)}))"


def run_cell(page: DevTools, marker: str) -> int:
    """Select the first cell whose source holds ``marker``, run it and wait until the kernel is idle again."""
    index = page.evaluate(cell_index(marker))
    if index < 0:
        raise LookupError(f"no cell holds {marker!r}")
    page.evaluate(
        f"(async () => {{ const nb = {PANEL}.content; nb.deselectAll(); nb.activeCellIndex = {index};"
        f" await jupyterapp.commands.execute('notebook:run-cell'); return true; }})()"
    )
    page.wait_for(f"{PANEL}.content.widgets[{index}].model.executionCount !== null && {KERNEL_IDLE}", 180)
    return index


def output_of(index: int | str) -> str:
    """The JavaScript for cell ``index``'s output area in JupyterLab (or ``index`` itself, an expression)."""
    if isinstance(index, str):
        return index
    return f"{PANEL}.content.widgets[{index}].node.querySelector('.jp-OutputArea')"


def live_state(page: DevTools, index: int | str) -> dict:
    """What the live control's output shows: its sliders' readouts and the figure's image (as a data URL)."""
    return page.evaluate(
        f"""(async () => {{
        const out = {output_of(index)};
        const img = out && out.querySelector('.widget-image, img');
        if (!img || !img.complete || !img.naturalWidth) return null;
        const blob = await (await fetch(img.src)).blob();
        const data = await new Promise(r => {{ const f = new FileReader(); f.onload = () => r(f.result);
                                              f.readAsDataURL(blob); }});
        const readouts = [...out.querySelectorAll('.widget-readout')].map(e => e.textContent.trim());
        const sliders = [...out.querySelectorAll('.widget-slider .noUi-target')].length;
        const pickers = [...out.querySelectorAll('.widget-toggle-buttons')].map(
            g => (g.querySelector('button.mod-active') || {{}}).textContent);
        return {{readouts, sliders, pickers, image: data, width: img.naturalWidth, height: img.naturalHeight}};
    }})()"""
    )


def slider_geometry(page: DevTools, index: int | str, which: int) -> dict:
    """The page coordinates of slider ``which``'s handle and of its track's ends (scrolled into view first)."""
    return page.evaluate(
        f"""(() => {{
        const out = {output_of(index)};
        const target = out.querySelectorAll('.widget-slider .noUi-target')[{which}];
        target.scrollIntoView({{block: 'center'}});
        const track = target.getBoundingClientRect(), handle = target.querySelector('.noUi-handle').getBoundingClientRect();
        return {{x: handle.x + handle.width / 2, y: handle.y + handle.height / 2, left: track.left, right: track.right}};
    }})()"""
    )


def open_notebook(page: DevTools, base: str, token: str, relative: str, app: str = "lab/tree") -> None:
    page.navigate(f"{base}/{app}/{relative}?token={token}")  # course.py lab serves the notebooks folder
    page.wait_for(
        f"typeof jupyterapp !== 'undefined' && {PANEL}?.content?.widgets?.length > 0 && {KERNEL_IDLE}",
        180,
        "the notebook and its kernel",
    )


def click_live_option(page: DevTools, index: int | str, which: int, label: str) -> None:
    """Click the button ``label`` of picker ``which`` (a row of buttons) with the mouse."""
    where = page.evaluate(
        f"""(() => {{
        const group = {output_of(index)}.querySelectorAll('.widget-toggle-buttons')[{which}];
        const button = [...group.querySelectorAll('button')].find(b => b.textContent.trim() === {json.dumps(label)});
        button.scrollIntoView({{block: 'center'}});
        const r = button.getBoundingClientRect();
        return {{x: r.x + r.width / 2, y: r.y + r.height / 2}};
    }})()"""
    )
    for kind, buttons in (("mousePressed", 1), ("mouseReleased", 0)):
        page.call(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": where["x"], "y": where["y"], "button": "left", "buttons": buttons, "clickCount": 1},
            session=True,
        )


def move_live_slider(page: DevTools, index: int | str, which: int, fraction: float, tries: int = 3) -> None:
    """Drag slider ``which`` to ``fraction`` of its track, as a hand does. The handle is measured once it has stopped
    moving (a slide that is still settling, or an image that loads above it, moves it); a drag that the slider did
    not take (its readout unchanged) is made again, as a hand would, up to ``tries`` times."""

    def readout() -> str | None:
        state = live_state(page, index)
        return state["readouts"][which] if state and len(state["readouts"]) > which else None

    before = readout()
    for attempt in range(tries):
        g, previous, deadline = None, None, time.monotonic() + 20
        while g is None or (g != previous and time.monotonic() < deadline):  # until two measures agree
            previous, g = g, slider_geometry(page, index, which)
            time.sleep(0.4)
        page.drag((g["x"], g["y"]), (g["left"] + fraction * (g["right"] - g["left"]), g["y"]))
        if before is None:  # no readout to watch
            return
        deadline = time.monotonic() + 10 * (attempt + 1)
        while time.monotonic() < deadline:
            if readout() not in (None, before):
                return
            time.sleep(0.3)


def run_above(page: DevTools, marker: str) -> None:
    """Run every cell above the first one that holds ``marker`` (JupyterLab's "Run All Above Selected Cell")."""
    index = page.evaluate(cell_index(marker))
    page.evaluate(
        f"(async () => {{ const nb = {PANEL}.content; nb.deselectAll(); nb.activeCellIndex = {index};"
        f" await jupyterapp.commands.execute('notebook:run-all-above'); return true; }})()",
        timeout=600,
    )
    page.wait_for(
        f"{PANEL}.content.widgets.slice(0, {index}).every(c => c.model.type !== 'code' || c.model.executionCount"
        f" !== null) && {KERNEL_IDLE}",
        600,
        "the cells above",
    )


def wait_for_live(page: DevTools, index: int | str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = live_state(page, index)
        if state and (state["sliders"] or state["pickers"]):
            return state
        time.sleep(0.5)
    raise TimeoutError("the live control did not appear")


def wait_for_change(page: DevTools, index: int | str, before: dict, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        after = live_state(page, index)
        if after and after["image"] != before["image"]:
            return after
        time.sleep(0.3)
    return live_state(page, index)


# In RISE's slideshow the application is not exposed: the live cell is run as a hand runs it, a click in its
# editor and Ctrl+Enter (run in place), on the slide RISE opens at (?activeCellIndex=).
RISE_CELL = "[...document.querySelectorAll('.jp-CodeCell')].find(c => c.textContent.includes({marker}))"


def open_rise(page: DevTools, base: str, token: str, relative: str, index: int, marker: str) -> None:
    """Leave JupyterLab (its notebook saved, so that no "leave the page?" question stops the browser) and open the
    notebook in RISE at cell ``index``, in the same kernel (the server keeps one session per notebook)."""
    page.evaluate("(async () => { await jupyterapp.commands.execute('docmanager:save'); return true; })()")
    page.navigate(f"{base}/rise/{relative}?token={token}&activeCellIndex={index}")
    cell = RISE_CELL.format(marker=json.dumps(marker))
    page.wait_for(
        f"document.querySelector('.reveal .slides') && {cell} && {cell}.closest('section.present')"
        f" && {cell}.getBoundingClientRect().width > 0",
        180,
        "RISE's slide with the live cell",
    )


def run_in_rise(page: DevTools, marker: str) -> None:
    cell = RISE_CELL.format(marker=json.dumps(marker))
    where = page.evaluate(
        f"(() => {{ const r = {cell}.querySelector('.cm-content').getBoundingClientRect();"
        " return {x: r.x + 40, y: r.y + r.height / 2}; })()"
    )
    for kind, buttons in (("mousePressed", 1), ("mouseReleased", 0)):
        page.call(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": where["x"], "y": where["y"], "button": "left", "buttons": buttons, "clickCount": 1},
            session=True,
        )
    for kind in ("rawKeyDown", "keyUp"):  # Ctrl+Enter: run the cell and stay on it
        page.call(
            "Input.dispatchKeyEvent",
            {"type": kind, "modifiers": 2, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13},
            session=True,
        )


def rise_output(marker: str) -> str:
    """The JavaScript for the live cell's output area in RISE's slideshow."""
    return RISE_CELL.format(marker=json.dumps(marker)) + ".querySelector('.jp-OutputArea')"


def run_live_in_rise(page: DevTools, marker: str, tries: int = 3) -> dict:
    """Run the live cell on its slide until its control shows (a click can land before the slide is ready to take
    it: then the cell is run again). Returns its state (:func:`live_state`)."""
    for attempt in range(tries):
        run_in_rise(page, marker)
        try:
            return wait_for_live(page, rise_output(marker), timeout=40 * (attempt + 1))
        except TimeoutError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def scroll_to_reach(page: DevTools, element: str, tries: int = 40) -> dict:
    """Turn the mouse wheel over the page's middle, as a hand does, until ``element`` (a JavaScript expression) is
    wholly inside the window and nothing covers its middle; returns its middle's coordinates. Raises LookupError if
    the wheel cannot bring it there (a slide that does not scroll)."""
    probe = f"""(() => {{
        const e = {element};
        if (!e) return null;
        const r = e.getBoundingClientRect(), x = r.x + r.width / 2, y = r.y + r.height / 2;
        const inside = r.width > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0
            && r.right <= window.innerWidth;
        const hit = document.elementFromPoint(x, y);
        return {{x, y, top: r.top, bottom: r.bottom, reached: inside && !!hit && (hit === e || e.contains(hit))}};
    }})()"""
    where = None
    for _ in range(tries):
        where = page.evaluate(probe)
        if where and where["reached"]:
            return where
        middle = page.evaluate("({x: window.innerWidth / 2, y: window.innerHeight / 2})")
        page.call(
            "Input.dispatchMouseEvent",
            {"type": "mouseWheel", "x": middle["x"], "y": middle["y"], "deltaX": 0, "deltaY": 150},
            session=True,
        )
        time.sleep(0.3)
    raise LookupError(f"the wheel does not bring it into the window: {where}")


def click_at(page: DevTools, where: dict) -> None:
    for kind, buttons in (("mousePressed", 1), ("mouseReleased", 0)):
        page.call(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": where["x"], "y": where["y"], "button": "left", "buttons": buttons, "clickCount": 1},
            session=True,
        )


def live_button(index: int | str, label: str) -> str:
    """The JavaScript for the live control's button ``label`` (its action, e.g. "sample")."""
    return f"[...{output_of(index)}.querySelectorAll('button')].find(b => b.textContent.trim() === {json.dumps(label)})"


def live_text(page: DevTools, index: int | str) -> str:
    """What the live control's action wrote under it (its last <pre>)."""
    return page.evaluate(
        f"(() => {{ const t = {output_of(index)}.querySelector('.widget-html pre');"
        " return t ? t.textContent : ''; })()"
    )


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", help="lang/NN, e.g. en/03")
    parser.add_argument("--out", type=Path, default=Path("live-screenshots"))
    parser.add_argument("--slider", type=int, default=0, help="which slider to move (0: the first)")
    parser.add_argument("--to", type=float, default=0.1, help="where to let it go, as a share of the track")
    parser.add_argument("--marker", default="_control(", help="text of the live cell")
    parser.add_argument("--pick", help="instead of a slider, click this button of picker --slider (e.g. 5)")
    parser.add_argument("--rise", action="store_true", help="move the slider in RISE's live slides")
    args = parser.parse_args(argv)
    lang, number = args.notebook.split("/")
    (path,) = (ROOT / "notebooks" / lang).glob(f"{number}_*.ipynb")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, course_lab(Path(tmp), [path]) as (base, token):
        page = DevTools(Path(tmp) / "chromium.log")
        try:
            relative = f"{lang}/{path.name}"
            open_notebook(page, base, token, relative)
            start = time.monotonic()
            run_above(page, args.marker)
            index = run_cell(page, args.marker)
            where: int | str = index
            if args.rise:
                open_rise(page, base, token, relative, index, args.marker)
                before = run_live_in_rise(page, args.marker)
                where = rise_output(args.marker)
            else:
                before = wait_for_live(page, index)
            view = "rise" if args.rise else "lab"
            page.screenshot(args.out / f"{lang}_{number}_{view}_before.png")
            if args.pick is not None:
                click_live_option(page, where, args.slider, args.pick)
            else:
                move_live_slider(page, where, args.slider, args.to)
            after = wait_for_change(page, where, before)
            page.screenshot(args.out / f"{lang}_{number}_{view}_after.png")
            print("readouts:", before["readouts"], before["pickers"], "->", after["readouts"], after["pickers"])
            print("figure changed:", after["image"] != before["image"], f"({time.monotonic() - start:.1f} s)")
        finally:
            page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
