#!/usr/bin/env python3
"""web/serve.py — serve the browser build (build-web/site/) on this machine, with the headers that let
the page use threads.

    python3 web/serve.py [--dir build-web/site] [--port 8080] [--bind 127.0.0.1]

The lab's threads share memory (SharedArrayBuffer), which browsers allow only on a cross-origin
isolated page: every response carries Cross-Origin-Opener-Policy: same-origin and
Cross-Origin-Embedder-Policy: require-corp. Files are served as they are (no compression, no cache).
"""
import argparse
import functools
import http.server
import os
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript", ".data": "application/octet-stream"}

    def end_headers(self):
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, fmt, *args):
        if os.environ.get("TTTLAB_SERVE_QUIET") != "1":
            super().log_message(fmt, *args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="build-web/site", help="the folder to serve (default build-web/site)")
    parser.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.dir, "index.html")):
        sys.exit(f"serve: {args.dir}/index.html not found (build the site first: bash scripts/web.sh --build-only)")
    handler = functools.partial(Handler, directory=args.dir)
    try:
        server = http.server.ThreadingHTTPServer((args.bind, args.port), handler)
    except OSError as e:
        sys.exit(f"serve: cannot listen on {args.bind}:{args.port}: {e.strerror} (try --port with another number)")
    host, port = server.server_address[:2]
    print(f"serving {args.dir} at http://{host}:{port}/  (Ctrl+C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
