"""Inline base64 or ``file_id``: what a document costs each request of a run.

For PDFs of growing size, one research turn after the file was read is sent through the
product's Claude adapter (``build_params``) to the contract fake
(``tests/helpers/fake_anthropic.py``, on this machine) twice: with the file inline
(base64) and with a ``file`` source naming an upload. Printed per size: the request body
(bytes) and the time to send it and have it answered, inline over ``file_id`` (ratios: how
many times dearer inline is, each turn), and the turns after which the time of the one
upload is repaid by what carrying the file inline costs more each turn.

Every later turn of the run carries the document again (the prompt cache saves tokens,
not bytes), so inline costs ~4/3 of the file per turn. A small file costs little either
way, and its upload (one more request, one more effect to journal, a file that can
expire) takes several turns to repay; from about 256 KB the upload is repaid within a turn
or two: the product sends files inline up to ``INLINE_MAX_BYTES`` (256 KB) and uploads
larger ones.

    .venv/bin/python bench/documents_bench.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402

from desktop_agent.engine.ports import ModelRequest  # noqa: E402
from desktop_agent.llm import documents as docs  # noqa: E402
from desktop_agent.llm.claude import build_params  # noqa: E402
from tests.documents.pdfs import make_pdf  # noqa: E402
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text  # noqa: E402

SIZES = (16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)
MODEL = "claude-sonnet-5-5"


def _request(blob: Path, data: bytes) -> ModelRequest:
    import hashlib

    descriptor = {
        "path": "report.pdf",
        "title": "report.pdf",
        "media_type": docs.PDF,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": 1,  # inline whatever the size (the bench chooses the source)
        "blob": str(blob),
        "seq": 2,
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Goal: read the report"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "text",
                    "is_error": False,
                    "document": descriptor,
                }
            ],
        },
    ]
    return ModelRequest(MODEL, "You research.", messages, [], 1024)


def _turn(sdk: anthropic.Anthropic, params: dict[str, Any]) -> tuple[int, float]:
    params = dict(params)
    params.pop("_documents", None)
    betas = params.pop("betas", None)
    size = len(json.dumps(params))
    start = time.perf_counter()
    if betas:
        sdk.beta.messages.create(**params, betas=betas)
    else:
        sdk.messages.create(**params)
    return size, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'file':>8} {'bytes inline/id':>16} {'time inline/id':>15} {'upload repaid in':>16}")
    with FakeAnthropic([Stream([Text("ok")])]) as fake, tempfile.TemporaryDirectory() as tmp:
        sdk = anthropic.Anthropic(api_key="sk-ant-bench", base_url=fake.url, max_retries=0)
        for size in SIZES:
            data = make_pdf(["Revenue grew 4% in 2025."], pad_to=size)
            blob = Path(tmp) / f"{size}.pdf"
            blob.write_bytes(data)
            request = _request(blob, data)
            start = time.perf_counter()
            file_id = sdk.beta.files.upload(
                file=("report.pdf", data, docs.PDF), betas=[docs.FILES_BETA]
            ).id
            upload_s = time.perf_counter() - start
            inline = build_params(request, MODEL)
            named = build_params(request, MODEL, file_ids={str(request_sha(request)): file_id})
            runs = [(_turn(sdk, inline), _turn(sdk, named)) for _ in range(args.repeat)]
            (i_size, _), (n_size, _) = runs[0]
            i_time = min(r[0][1] for r in runs)
            n_time = min(r[1][1] for r in runs)
            repaid = upload_s / max(1e-9, i_time - n_time)
            print(
                f"{size >> 10:>6}KB {i_size / n_size:>16.1f} {i_time / n_time:>15.2f}"
                f" {repaid:>11.1f} turns"
            )


def request_sha(request: ModelRequest) -> str:
    """The SHA-256 of the bench request's one document."""
    (descriptor,) = docs.descriptors(request.messages)
    return str(descriptor["sha256"])


if __name__ == "__main__":
    main()
