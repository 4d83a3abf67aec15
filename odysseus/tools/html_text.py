"""HTML to readable text, and DuckDuckGo's HTML result list, with the standard library parser."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import List, Tuple

#: Elements whose text is never content.
SKIP = {"script", "style", "noscript", "template", "svg", "head", "nav", "footer", "form", "iframe", "button"}
#: Elements that end a line of text.
BLOCK = {
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "main",
    "blockquote",
    "pre",
    "dd",
    "dt",
    "hr",
    "figcaption",
}
VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "track", "wbr"}


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: List[str] = []
        self.title: List[str] = []
        self.skip_depth = 0
        self.in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.in_title = True
        if tag in SKIP and tag not in VOID:
            self.skip_depth += 1
        if tag in BLOCK:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        if tag in SKIP and self.skip_depth:
            self.skip_depth -= 1
        if tag in BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.in_title:
            self.title.append(data)
            return
        if not self.skip_depth:
            self.parts.append(data)


def extract_text(page: str) -> Tuple[str, str]:
    """The title and the readable text of an HTML page (whitespace collapsed, blank lines kept single)."""
    parser = _TextParser()
    try:
        parser.feed(page)
        parser.close()
    except Exception:  # malformed HTML: keep what was parsed
        pass
    lines = [re.sub(r"[ \t\r\f\v\u00a0]+", " ", line).strip() for line in "".join(parser.parts).split("\n")]
    text = "\n".join(line for line in lines if line)
    return " ".join("".join(parser.title).split()), text


class _DDGParser(HTMLParser):
    """Collects ``a.result__a`` (title + link) and ``.result__snippet`` texts in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.results: List[dict] = []
        self.capture = None  # "title" or "snippet"
        self.buffer: List[str] = []
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if self.capture:
            self.depth += 1
            return
        if tag == "a" and "result__a" in classes:
            self.results.append({"title": "", "url": html.unescape(dict(attrs).get("href") or ""), "snippet": ""})
            self.capture, self.buffer, self.depth = "title", [], 0
        elif "result__snippet" in classes and self.results:
            self.capture, self.buffer, self.depth = "snippet", [], 0

    def handle_endtag(self, tag):
        if not self.capture:
            return
        if self.depth:
            self.depth -= 1
            return
        self.results[-1][self.capture] = " ".join("".join(self.buffer).split())
        self.capture = None

    def handle_data(self, data):
        if self.capture:
            self.buffer.append(data)


def parse_ddg_results(page: str) -> List[dict]:
    """Result rows ``{title, url, snippet}`` from a DuckDuckGo HTML results page."""
    parser = _DDGParser()
    try:
        parser.feed(page)
        parser.close()
    except Exception:
        pass
    return [r for r in parser.results if r["url"]]
