import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The dashboard web app (docs/web.md): built into dist/web, which the api serves at /app/.
// Everything is bundled (no CDN, no remote fonts); asset names carry a content hash, so the
// api may let browsers cache them for good.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/app/',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  // The repository's libs the page bundles (their tsconfig paths, which Vite does not read):
  // the prompts-file reader it shares with the CLI. (@app/sdk is imported for its types only.)
  resolve: {
    alias: { '@app/prompts-file': fileURLToPath(new URL('../../libs/prompts-file/src/index.ts', import.meta.url)) },
  },
  build: {
    outDir: fileURLToPath(new URL('../../dist/web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // No inline modulepreload polyfill script: the CSP allows scripts from 'self' only.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
});
