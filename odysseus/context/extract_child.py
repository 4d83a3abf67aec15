"""The child process that reads a PDF's text: run by ``odysseus.context.extract``, never imported.

It is started as ``python -I extract_child.py <cpu seconds> <memory bytes> <max chars>`` with the
file on stdin. Before it touches the file it limits itself (CPU time, address space) and silences
stderr, so a file crafted to inflate (a 36 KB PDF whose page decompresses to megabytes of drawing
operators) costs at most those limits, in this process, never the server's. It writes the text to
stdout, page after page, and stops at ``max chars``.

Exit codes: 0 done; 3 the text reached ``max chars`` (what was written is kept); 4 out of memory;
5 the PDF could not be read; 6 it unpacks past pypdf's own limits (a decompression bomb). The CPU
limit ends it with SIGXCPU/SIGKILL.
"""

import io
import os
import resource
import sys

CUT, NO_MEMORY, UNREADABLE, TOO_BIG = 3, 4, 5, 6


def main() -> int:
    """Limit this process, then stream the PDF's text to stdout."""
    cpu, memory, max_chars = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # pypdf's warnings about damaged files are not our output
    data = sys.stdin.buffer.read()
    out = sys.stdout
    try:
        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            reader.decrypt("")
        written = 0
        for page in reader.pages:
            text = (page.extract_text() or "").strip()
            if not text:
                continue
            piece = ("\n\n" if written else "") + text
            if written + len(piece) > max_chars:
                out.write(piece[: max_chars - written])
                out.flush()
                return CUT
            out.write(piece)
            written += len(piece)
        out.flush()
        return 0
    except MemoryError:
        return NO_MEMORY
    except Exception as exc:  # noqa: BLE001 - any failure to read is "unreadable", said by the exit code
        return TOO_BIG if type(exc).__name__ == "LimitReachedError" else UNREADABLE


if __name__ == "__main__":
    sys.exit(main())
