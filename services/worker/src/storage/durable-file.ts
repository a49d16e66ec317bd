import { randomUUID } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Replaces `path` with `data` so that a crash leaves either the old or the new content, never a
 * torn file: write a sibling, fsync it, rename over, fsync the directory.
 */
export async function writeFileDurably(path: string, data: string | Uint8Array): Promise<void> {
  const directory = dirname(path);
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const staged = `${path}.${randomUUID()}.tmp`;
  const handle = await open(staged, 'w', 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(staged, path);
  const directoryHandle = await open(directory, 'r');
  try {
    await directoryHandle.sync();
  } finally {
    await directoryHandle.close();
  }
}

export async function readFileIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Names in `directory` ending with `suffix` (staged `.tmp` files of an interrupted write excluded). */
export async function listFiles(directory: string, suffix: string): Promise<string[]> {
  try {
    return (await readdir(directory)).filter((name) => name.endsWith(suffix));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

export async function removeFile(path: string): Promise<void> {
  await rm(path, { force: true });
}
