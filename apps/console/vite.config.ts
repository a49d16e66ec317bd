import { defineConfig } from 'vite';

// The console is served by the gateway at `/` under a strict Content-Security-Policy (script-src 'self'):
// the build emits only files, never inline scripts or styles. `npm run dev` serves it with hot reload and
// passes the API to a running server (`npm start`), so the page and the API share one origin as in production.
const apiTarget = process.env.SVC_BASE_URL ?? 'http://localhost:8080';

export default defineConfig({
  base: '/',
  // Workspace packages (the remedies, the contract ABI) are read from their TypeScript sources.
  resolve: { conditions: ['@svc/source', 'module', 'browser', 'development|production'] },
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    modulePreload: { polyfill: false },
    // The balance and playground pages are loaded on first visit, with ethers' providers (~270 kB).
    chunkSizeWarningLimit: 400,
    assetsInlineLimit: 0,
  },
  server: {
    proxy: { '/api': apiTarget, '/v1': apiTarget },
  },
});
