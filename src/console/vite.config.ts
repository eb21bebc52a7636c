/**
 * The web console's build: `npm run build` bundles src/console into
 * dist/console, which the gateway serves at `/`. `npm run console:dev` serves
 * it with hot reload and proxies the API to a gateway on GATEWAY_URL
 * (default http://127.0.0.1:8080).
 */
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));
const gateway = process.env.GATEWAY_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  root,
  // Asset URLs are relative to / (the gateway serves the console at its root).
  base: '/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../../dist/console', import.meta.url)),
    emptyOutDir: true,
    // No source maps in the served bundle; the sources are in the repository.
    sourcemap: false,
    chunkSizeWarningLimit: 1024,
  },
  server: {
    proxy: {
      '/graphql': { target: gateway, ws: true, changeOrigin: true },
      '/dedicated': { target: gateway, changeOrigin: true },
    },
  },
});
