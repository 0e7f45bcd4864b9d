"""Gradio's own floor: what the app's /chat endpoint would sustain if a turn cost nothing.

    python bench/gradio_floor.py [--clients 50] [--turns 20] [--concurrency 16]

Starts, on a free loopback port, a Gradio app with the same Gradio version, queue settings and /chat
signature as app.py (inputs: message, chat history, K, session key, ask-me-first; outputs: chat
history, input box, stamps, receipt download) whose handler does no work: it yields the same updates
a real offline turn yields (the pending answer, the streamed answer, then the answer with a stamps
table and a receipt file to download) from values prepared once. The same plain-HTTP visitors as
bench/load.py (Gradio's call API and its event stream, one Gradio session per visitor) drive it.

Beside it, in the same run: the real app through the same client, and the raw in-process Engine.turn
rate (bench/load.py's rows). If the per-turn costs simply add up on the machine's cores, the app
cannot exceed 1 / (1/floor + 1/raw) turns/s; the table prints that ceiling. It also prints each server's
CPU time per completed turn (the process's user + system time over the run, /proc): on a machine others share,
the turns/s swing with their load, the CPU a turn costs much less, and its ratio is the goal's bound.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root first (bench/ would shadow packages)
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench import load  # noqa: E402
from bench._machine import machine_line  # noqa: E402

STAMPS_ROWS = 8


def rate(res: load.Result) -> float:
    return len(res.latencies) / res.wall if res.wall else 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc; every thread of it)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(port: int, concurrency: int, work_dir: Path) -> None:
    """The do-nothing /chat app (runs in its own process)."""
    import gradio as gr

    receipt = work_dir / "rcpt_floor.json"
    receipt.write_bytes(b'{"payloadType": "floor", "payload": "' + b"A" * 6000 + b'"}')  # a receipt's size
    stamps = "| seq | role | memory | digest |\n|---|---|---|---|\n" + "".join(
        f"| {i} | user | I like pizza, long walks by the river and the old jazz records {i} | `{i:064x}`[:12] |\n"
        for i in range(STAMPS_ROWS)
    )
    answer = "(offline stand-in) " + "words of an answer " * 20

    def chat(message: str, history: list[dict[str, str]], k: float, key: str, consent: bool):  # type: ignore[no-untyped-def]
        base = list(history or [])
        asked = {"role": "user", "content": message}
        yield [*base, asked, {"role": "assistant", "content": "…"}], "", gr.skip(), gr.skip()
        yield [*base, asked, {"role": "assistant", "content": answer}], gr.skip(), gr.skip(), gr.skip()
        yield [*base, asked, {"role": "assistant", "content": answer}], gr.skip(), stamps, gr.DownloadButton(value=str(receipt), interactive=True)

    with gr.Blocks(analytics_enabled=False) as demo:
        chatbot = gr.Chatbot()
        msg = gr.Textbox()
        k = gr.Slider(1, 50, value=8, step=1)
        key = gr.Textbox()
        consent = gr.Checkbox(False)
        stamps_md = gr.Markdown()
        download = gr.DownloadButton("receipt", interactive=False)
        msg.submit(chat, [msg, chatbot, k, key, consent], [chatbot, msg, stamps_md, download], api_name="chat")
    demo.queue(default_concurrency_limit=concurrency)
    demo.launch(server_name="127.0.0.1", server_port=port, quiet=True, enable_monitoring=False, allowed_paths=[str(work_dir)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # internal: run the floor app on this port
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.concurrency, Path(args.dir))
        return 0
    os.environ.pop("GROQ_API_KEY", None)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        tmpd = Path(tmp)
        rows = []
        cpu: dict[str, float] = {}  # the server process's CPU seconds per completed turn
        # 1. the floor
        port = load.free_port()
        log_path = tmpd / "floor.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(port), "--dir", str(tmpd), "--concurrency", str(args.concurrency)],
                stdout=log, stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}/"
        try:
            load.wait_ready(url, proc, log_path)
            c0 = cpu_seconds(proc.pid)
            floor = load.sse_run(url, load.visitors(args.clients), args.turns)
            cpu["floor"] = (cpu_seconds(proc.pid) - c0) / max(1, len(floor.latencies))
            floor.label = "floor: a do-nothing /chat on the same Gradio (plain HTTP, same client)"
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        rows.append(floor)
        # 2. the real app, same client
        port = load.free_port()
        app_log = tmpd / "app.log"
        proc = load.start_server(tmpd / "app-data", port, args.concurrency, app_log)
        url = f"http://127.0.0.1:{port}/"
        try:
            load.wait_ready(url, proc, app_log)
            people = load.visitors(args.clients)
            c0 = cpu_seconds(proc.pid)
            app_res = load.sse_run(url, people, args.turns)
            cpu["app"] = (cpu_seconds(proc.pid) - c0) / max(1, len(app_res.latencies))
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        load.check_receipts(app_res, tmpd / "app-data", people)
        rows.append(app_res)
        # 3. the engine alone
        raw_people = load.visitors(args.clients)
        raw = load.raw_run(tmpd / "raw-data", raw_people, args.turns)
        load.check_receipts(raw, tmpd / "raw-data", raw_people)
        rows.append(raw)
    print(f"Gradio floor: {args.clients} visitors × {args.turns} turns, --concurrency {args.concurrency}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(machine_line())
    print()
    print(load.HEADER)
    for res in rows:
        print(res.row())
    f_rate, raw_rate = rate(floor), rate(raw)
    ceiling = 1.0 / (1.0 / f_rate + 1.0 / raw_rate) if f_rate and raw_rate else 0.0
    print()
    print(f"ceiling if the costs add up: 1 / (1/{f_rate:.1f} + 1/{raw_rate:.1f}) = {ceiling:.1f} turns/s; the app measured {rate(app_res):.1f}")
    cores = os.cpu_count() or 1
    print(
        f"server CPU per turn (user + system, all its threads): floor {cpu['floor'] * 1000:.1f} ms, app {cpu['app'] * 1000:.1f} ms; "
        f"on {cores} cores they bound the rates at {cores / cpu['floor']:.0f} and {cores / cpu['app']:.0f} turns/s, "
        f"a ratio of {cpu['floor'] / cpu['app']:.2f}"
    )
    problems = [p for res in rows for p in res.errors + res.leaks + res.receipts_failed]
    for p in problems[:20]:
        print(f"- {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
