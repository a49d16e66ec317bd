import { existsSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '@svc/platform';
import express, { Router, type NextFunction, type Response } from 'express';
import { answerNotFound } from './api-errors.js';

/** The CONSOLE_DIR value that turns the console off (an empty value is unset, as for every setting). */
export const CONSOLE_OFF = 'off';

/**
 * The console's own policy, in place of the gateway's `default-src 'none'`: its files come from this
 * origin only, and it talks to `/api` and `/v1` here. The wallet's provider is injected by the extension,
 * so the page needs no other origin; nothing inline runs, and no one may frame it.
 */
export const CONSOLE_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const CONSOLE_NOT_BUILT =
  'The web console is not built here: run npm run generate -w @svc/console (or set CONSOLE_DIR).';

// The page names its assets by content hash, so a new build is new URLs: the page itself must be
// revalidated every time, while an asset never changes under its name.
const PAGE_CACHE_CONTROL = 'no-cache';
const ASSET_MAX_AGE = '1y';
// Favicons keep their names across builds; browsers ask for them without the page saying so.
const FAVICONS = ['/favicon.ico', '/favicon.svg'];

/**
 * Where the console's build is: CONSOLE_DIR, else the `dist` of the `@svc/console` package; undefined when
 * that package is not installed. Resolved when the app is built, not imported: the gateway runs without it.
 */
export function consoleDirectory(setting: string | undefined): string | undefined {
  if (setting !== undefined) return resolve(setting);
  try {
    return join(dirname(fileURLToPath(import.meta.resolve('@svc/console/package.json'))), 'dist');
  } catch {
    return undefined;
  }
}

export interface ConsoleRoutesSettings {
  /** The console's build (index.html, assets/); undefined when there is none to serve. */
  readonly dir: string | undefined;
  readonly logger: Logger;
}

/**
 * The web console: `/` (and `/index.html`), the hashed files under `/assets/`, and a favicon. Nothing else
 * of the build is served, no directory is listed and no dotfile is read; any other path falls through to
 * the gateway's JSON 404. Files are read per request, so a console built after start is served at once.
 */
export function consoleRoutes({ dir, logger }: ConsoleRoutesSettings): Router {
  const router = Router();
  if (dir === undefined || !existsSync(join(dir, 'index.html')))
    logger.info({ dir: dir ?? null }, 'the web console is not served: no build of it here');

  router.get(['/', '/index.html'], (_req, res, next) => {
    if (dir === undefined) answerNotFound(res, CONSOLE_NOT_BUILT);
    else sendConsoleFile(dir, 'index.html', res, next, () => answerNotFound(res, CONSOLE_NOT_BUILT));
  });
  if (dir === undefined) return router;
  router.use(
    '/assets',
    express.static(join(dir, 'assets'), {
      index: false,
      redirect: false,
      dotfiles: 'ignore',
      maxAge: ASSET_MAX_AGE,
      immutable: true,
      // Only on a file served: a 404 that falls through keeps the gateway's policy.
      setHeaders: (res) => res.setHeader('content-security-policy', CONSOLE_CONTENT_SECURITY_POLICY),
    }),
  );
  router.get(FAVICONS, (req, res, next) => {
    sendConsoleFile(dir, basename(req.path).toLowerCase(), res, next, () => next());
  });
  return router;
}

/** Sends one file of the build, revalidated on every use; `missing` answers when it is not there. */
function sendConsoleFile(
  dir: string,
  name: string,
  res: Response,
  next: NextFunction,
  missing: () => void,
): void {
  res.sendFile(
    name,
    {
      root: dir,
      dotfiles: 'ignore',
      cacheControl: false,
      headers: {
        'cache-control': PAGE_CACHE_CONTROL,
        'content-security-policy': CONSOLE_CONTENT_SECURITY_POLICY,
        ...(name === 'index.html' ? { 'content-type': 'text/html; charset=utf-8' } : {}),
      },
    },
    (error?: NodeJS.ErrnoException & { status?: number }) => {
      // A client that left, or a failure once the file was under way: nothing more can be answered.
      if (error === undefined || res.headersSent || error.code === 'ECONNABORTED') return;
      if (error.status === 404 || error.code === 'EISDIR') missing();
      else next(error);
    },
  );
}
