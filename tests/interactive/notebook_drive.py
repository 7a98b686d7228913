#!/usr/bin/python3
"""Drives a notebook through the coordinator's notebook proxy, as a browser
would, and prints what it saw as one JSON object (notebook_browser_test.cc
checks it). Steps: tenant B's login is refused the notebook; no session is
401; tenant A logs in, waits until the notebook answers through the proxy,
starts a kernel (REST) and runs a cell over the kernel's WebSocket channels
(everything through the proxy); optionally Chromium, driven over the
DevTools protocol with A's session cookie, loads the notebook's tree page and
screenshots it.

Debian's python3 (for its tornado, which jupyter-notebook brings)."""
import argparse
import asyncio
import base64
import http.client
import json
import ssl
import subprocess
import sys
import time
import uuid

from tornado import httpclient, ioloop, websocket

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--ca", required=True)
p.add_argument("--job", required=True)
p.add_argument("--token", required=True)
p.add_argument("--other-token", default="")
p.add_argument("--code", default="print(6*7)")
p.add_argument("--wait-s", type=float, default=90)
p.add_argument("--screenshot", default="")
p.add_argument("--chromium-dir", default="/tmp/athanor-notebook-chromium")
p.add_argument("--leave-busy", action="store_true",
               help="close the cell's WebSocket once the kernel is busy with it, without waiting for its end")
p.add_argument("--dashboard", default="",
               help="instead of a notebook: the dashboard's URL; wait for --banner-job's idle banner, screenshot")
p.add_argument("--banner-job", default="")
args = p.parse_args()

ctx = ssl.create_default_context(cafile=args.ca)
ctx.check_hostname = False  # the certificate names coordinator.athanor; the chain is still checked
base = f"/notebook/{args.job}/"
out = {}


def request(method, path, headers=None, body=None):
    c = http.client.HTTPSConnection("127.0.0.1", args.port, context=ctx, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    cookie = r.getheader("Set-Cookie", "")
    c.close()
    return r.status, data.decode("utf-8", "replace"), cookie


def login(token):
    status, body, cookie = request("POST", "/notebook-login", {"Authorization": "Bearer " + token})
    return status, cookie.split(";")[0] if cookie else "", cookie




def dashboard_banner(url, job, path):
    """Chromium over the DevTools protocol on the dashboard's overview: waits
    (the page polls every 2 s) for job's idle banner, screenshots the page."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    chrome = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                               "--ignore-certificate-errors", "--window-size=1280,1000",
                               f"--user-data-dir={args.chromium_dir}", f"--remote-debugging-port={port}",
                               "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        target = None
        t = time.monotonic()
        while target is None and time.monotonic() - t < 30:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/json/list")
                pages = [x for x in json.loads(c.getresponse().read()) if x.get("type") == "page"]
                target = pages[0]["webSocketDebuggerUrl"] if pages else None
            except OSError:
                pass
            if target is None:
                time.sleep(0.2)  # sleep override: chromium is another process

        async def drive():
            ws = await websocket.websocket_connect(target)
            n = [0]

            async def call(method, **params):
                n[0] += 1
                await ws.write_message(json.dumps({"id": n[0], "method": method, "params": params}))
                while True:
                    m = json.loads(await ws.read_message())
                    if m.get("id") == n[0]:
                        return m

            await call("Page.enable")
            await call("Page.navigate", url=url)
            found = {}
            t1 = time.monotonic()
            expr = (f"(() => {{ const b = document.querySelector('[data-banner=\"{job}\"]'); "
                    "return b ? b.innerText : ''; })()")
            while time.monotonic() - t1 < args.wait_s:
                r = await call("Runtime.evaluate", expression=expr)
                text = r["result"]["result"].get("value", "")
                if text:
                    found["banner_text"] = text
                    found["banner_after_s"] = round(time.monotonic() - t1, 3)
                    break
                await ioloop.IOLoop.current().run_in_executor(None, time.sleep, 0.2)  # sleep override: page polls
            shot = await call("Page.captureScreenshot", format="png")
            with open(path, "wb") as f:
                f.write(base64.b64decode(shot["result"]["data"]))
            r = await call("Runtime.evaluate", expression="document.documentElement.outerHTML")
            found["dom_has_banner"] = f'data-banner="{job}"' in r["result"]["result"].get("value", "")
            ws.close()
            return found

        return ioloop.IOLoop.current().run_sync(drive)
    finally:
        chrome.kill()
        chrome.wait()


if args.dashboard:
    out.update(dashboard_banner(args.dashboard, args.banner_job, args.screenshot))
    print(json.dumps(out))
    sys.exit(0 if "banner_text" in out else 1)

# No session: 401 with the login form.
status, body, _ = request("GET", base + "api/kernels")
out["anonymous_status"] = status
# A bad token cannot log in.
out["bad_login_status"] = login("not-a-token")[0]
if args.other_token:
    s, cookie_b, _ = login(args.other_token)
    out["other_login_status"] = s
    status, body, _ = request("GET", base + "api/kernels", {"Cookie": cookie_b})
    out["other_status"] = status
    out["other_body"] = body.strip()
s, cookie, raw = login(args.token)
out["login_status"] = s
out["cookie_attributes"] = sorted(a.strip() for a in raw.split(";")[1:])
headers = {"Cookie": cookie}

# The notebook server starts with the rank: poll until it answers (outside process).
t0 = time.monotonic()
while True:  # each try and its answer go to stderr, for a failure's diagnosis
    print(f"{time.strftime('%H:%M:%S')} GET {base}api/kernels", file=sys.stderr, flush=True)
    status, body, _ = request("GET", base + "api/kernels", headers)
    print(f"{time.strftime('%H:%M:%S')} -> {status} {body[:120]!r}", file=sys.stderr, flush=True)
    if status == 200:
        break
    if time.monotonic() - t0 > args.wait_s or " is FAILED" in body or " is CANCELLED" in body:
        out["error"] = f"the notebook did not answer through the proxy in {args.wait_s} s: {status} {body[:300]}"
        print(json.dumps(out))
        sys.exit(1)
    time.sleep(0.2)  # sleep override: the server is another process
out["reachable_after_s"] = round(time.monotonic() - t0, 3)

status, body, _ = request("POST", base + "api/kernels", dict(headers, **{"Content-Type": "application/json"}), "{}")
out["kernel_status"] = status
kernel = json.loads(body)["id"]


def kernel_state():
    status, body, _ = request("GET", base + "api/kernels", headers)
    states = [k.get("execution_state") for k in json.loads(body)] if status == 200 else []
    return states[0] if states else status


async def run_cell():
    req = httpclient.HTTPRequest(f"wss://127.0.0.1:{args.port}{base}api/kernels/{kernel}/channels",
                                 headers=dict(headers, Origin=f"https://127.0.0.1:{args.port}"),
                                 ssl_options=ctx, request_timeout=30)
    ws = await websocket.websocket_connect(req)
    if args.leave_busy:
        # The server learns a kernel's state from its own iopub subscription,
        # which joins after the kernel starts and would miss the cell's one
        # "busy": wait until it has seen the kernel go idle (another process).
        # A kernel publishes its state only when asked something, so a
        # subscription that joined after the kernel's last answer (a loaded
        # machine) would see "starting" forever: ask for the kernel's info
        # once a second, each answer going busy then idle on iopub. A kernel
        # still not seen idle after 8 s is replaced, and the tries reported.
        t = time.monotonic()
        asked = 0
        while kernel_state() != "idle" and time.monotonic() - t < 8:
            if time.monotonic() - t >= asked:
                asked += 1
                await ws.write_message(json.dumps({
                    "header": {"msg_id": uuid.uuid4().hex, "username": "test", "session": uuid.uuid4().hex,
                               "msg_type": "kernel_info_request", "version": "5.3"},
                    "parent_header": {}, "metadata": {}, "channel": "shell", "content": {}}))
            await asyncio.sleep(0.2)  # sleep override: the notebook server is another process
        if kernel_state() != "idle":
            ws.close()
            return None, "unseen"
    msg_id = uuid.uuid4().hex
    await ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                   "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": args.code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    stdout, reply = "", None
    deadline = time.monotonic() + 60
    while reply is None or not stdout:
        if time.monotonic() > deadline:
            break
        m = await ws.read_message()
        if m is None:
            break
        m = json.loads(m)
        if m.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if args.leave_busy and m["msg_type"] == "status" and m["content"]["execution_state"] == "busy":
            reply = "busy"  # the cell runs on; no browser stays attached
            break
        if m["msg_type"] == "stream":
            stdout += m["content"]["text"]
        elif m["msg_type"] == "execute_reply":
            reply = m["content"]["status"]
        elif m["msg_type"] == "error":
            stdout += "ERROR " + m["content"]["ename"] + ": " + m["content"]["evalue"]
    ws.close()
    return stdout, reply


out["cell_stdout"], out["cell_status"] = ioloop.IOLoop.current().run_sync(run_cell)
out["kernel_tries"] = 1
while out["cell_status"] == "unseen" and out["kernel_tries"] < 3:
    request("DELETE", base + f"api/kernels/{kernel}", headers)
    status, body, _ = request("POST", base + "api/kernels", dict(headers, **{"Content-Type": "application/json"}),
                              "{}")
    kernel = json.loads(body)["id"]
    out["kernel_tries"] += 1
    out["cell_stdout"], out["cell_status"] = ioloop.IOLoop.current().run_sync(run_cell)
if args.leave_busy:  # the server's view follows the kernel's iopub (another process)
    t = time.monotonic()
    while kernel_state() != "busy" and time.monotonic() - t < 10:
        time.sleep(0.2)  # sleep override: the notebook server is another process
status, body, _ = request("GET", base + "api/kernels", headers)
out["kernels_after"] = [k.get("execution_state") for k in json.loads(body)] if status == 200 else status


def screenshot(path):
    """Chromium over the DevTools protocol: A's session cookie, then the page."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    chrome = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                               "--ignore-certificate-errors", "--window-size=1280,900",
                               f"--user-data-dir={args.chromium_dir}", f"--remote-debugging-port={port}",
                               "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t = time.monotonic()
        target = None
        while target is None and time.monotonic() - t < 30:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/json/list")
                pages = [x for x in json.loads(c.getresponse().read()) if x.get("type") == "page"]
                target = pages[0]["webSocketDebuggerUrl"] if pages else None
            except OSError:
                pass
            if target is None:
                time.sleep(0.2)  # sleep override: chromium is another process

        async def drive():
            ws = await websocket.websocket_connect(target)
            n = [0]

            async def call(method, **params):
                n[0] += 1
                await ws.write_message(json.dumps({"id": n[0], "method": method, "params": params}))
                while True:
                    m = json.loads(await ws.read_message())
                    if m.get("id") == n[0]:
                        return m

            name, value = cookie.split("=", 1)
            await call("Network.enable")
            await call("Network.setCookie", name=name, value=value, domain="127.0.0.1", path="/notebook/",
                       secure=True, httpOnly=True, sameSite="Strict")
            await call("Page.enable")
            await call("Page.navigate", url=f"https://127.0.0.1:{args.port}{base}tree")
            title = ""
            t1 = time.monotonic()
            while time.monotonic() - t1 < 30:
                r = await call("Runtime.evaluate", expression="document.title + '|' + document.body.innerText.length")
                title = r["result"]["result"].get("value", "")
                if title.startswith("Home") and not title.endswith("|0"):
                    break
                await ioloop.IOLoop.current().run_in_executor(None, time.sleep, 0.3)  # sleep override: page loads
            r = await call("Runtime.evaluate", expression="document.body.innerText")
            text = r["result"]["result"].get("value", "")
            shot = await call("Page.captureScreenshot", format="png")
            with open(path, "wb") as f:
                f.write(base64.b64decode(shot["result"]["data"]))
            ws.close()
            return title.split("|")[0], text

        return ioloop.IOLoop.current().run_sync(drive)
    finally:
        chrome.kill()
        chrome.wait()


if args.screenshot:
    title, _ = screenshot(args.screenshot)
    out["page_title"] = title
print(json.dumps(out))
