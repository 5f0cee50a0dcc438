// web/coi.js — makes the page cross-origin isolated on hosts that cannot send headers.
//
// The lab's threads share memory (SharedArrayBuffer), which browsers allow only on a page served with
// Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp. web/serve.py
// sends them. A static host that cannot (GitHub Pages, a plain bucket) still can serve a service
// worker: sw.js adds the two headers to every response of this site, and the page reloads once, under
// its control. Service workers need https:// or localhost.
(function () {
  if (self.crossOriginIsolated) return;
  if (!window.isSecureContext || !('serviceWorker' in navigator)) return;
  const key = 'tttlab-coi-reloaded';
  if (navigator.serviceWorker.controller) {
    // Controlled but still not isolated: the worker cannot help here; do not reload in a loop.
    if (sessionStorage.getItem(key)) return;
  }
  window.tttlabCoiReloading = true;
  navigator.serviceWorker.register('sw.js').then((registration) => {
    const reload = () => { sessionStorage.setItem(key, '1'); window.location.reload(); };
    if (navigator.serviceWorker.controller) { reload(); return; }
    const worker = registration.installing || registration.waiting || registration.active;
    if (worker && worker.state === 'activated') { reload(); return; }
    navigator.serviceWorker.addEventListener('controllerchange', reload);
  }, (error) => {
    window.tttlabCoiReloading = false;
    console.error('TTT Lab: the service worker that isolates the page could not start: ' + error);
  });
})();
