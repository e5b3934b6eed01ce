// A loopback proxy that adds `Authorization: Bearer <token>` to every request it forwards, for the
// official conformance runner: its server mode takes a URL and no headers, and Kiln serves /mcp
// to no one without a token (an auth-off switch in Kiln would be the hole case 32 closed).
import http from 'node:http';

// Resolves { url (the proxy's, same path as `target`), close() }.
export function startAuthProxy(target, token) {
  const up = new URL(target);
  let mine = 0;
  // The Host the client sent, moved to Kiln's port when it names this proxy; any other Host
  // goes through untouched, so the DNS-rebinding scenario still sees Kiln refuse it.
  const host = (h = '') => {
    const m = /^(localhost|127\.0\.0\.1|\[::1\])(?::(\d+))?$/i.exec(h);
    return m && (!m[2] || Number(m[2]) === mine) ? `${m[1]}:${up.port}` : h;
  };
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, host: host(req.headers.host), authorization: `Bearer ${token}` };
    const fwd = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers, agent: false },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);  // SSE streams flow through as they arrive
      });
    fwd.on('error', (e) => { if (!res.headersSent) res.writeHead(502); res.end(String(e)); });
    res.on('close', () => fwd.destroy());
    req.pipe(fwd);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      mine = port;
      resolve({
        url: `http://127.0.0.1:${port}${up.pathname}`,
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
      });
    });
  });
}
