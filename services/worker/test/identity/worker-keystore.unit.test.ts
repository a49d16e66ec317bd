import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkerKeystoreError, loadOrCreateWorkerKey } from '../../src/identity/worker-keystore.js';

const SCRYPT_N = 1 << 10;
const directories: string[] = [];

async function freshPath(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'worker-keystore-'));
  directories.push(directory);
  return join(directory, 'keys', 'worker.json');
}

afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

describe('loadOrCreateWorkerKey', () => {
  it('creates an encrypted keystore once and loads the same key afterwards', async () => {
    const path = await freshPath();
    const first = await loadOrCreateWorkerKey({ path, password: 'correct horse', scryptN: SCRYPT_N });
    expect(first.created).toBe(true);
    const json = await readFile(path, 'utf8');
    expect(json).not.toContain(first.wallet.privateKey.slice(2));
    expect(JSON.parse(json).address.toLowerCase()).toBe(first.wallet.address.slice(2).toLowerCase());
    expect((await stat(path)).mode & 0o777).toBe(0o600);

    const again = await loadOrCreateWorkerKey({ path, password: 'correct horse', scryptN: SCRYPT_N });
    expect(again.created).toBe(false);
    expect(again.wallet.address).toBe(first.wallet.address);
  });

  it('refuses a wrong password instead of making a second identity', async () => {
    const path = await freshPath();
    await loadOrCreateWorkerKey({ path, password: 'right', scryptN: SCRYPT_N });
    await expect(
      loadOrCreateWorkerKey({ path, password: 'wrong', scryptN: SCRYPT_N }),
    ).rejects.toBeInstanceOf(WorkerKeystoreError);
    await expect(loadOrCreateWorkerKey({ path, password: '' })).rejects.toThrow(RangeError);
  });

  it('gives concurrent first starts one and the same key', async () => {
    const path = await freshPath();
    const starts = await Promise.all(
      Array.from({ length: 4 }, () => loadOrCreateWorkerKey({ path, password: 'p', scryptN: SCRYPT_N })),
    );
    expect(new Set(starts.map((start) => start.wallet.address)).size).toBe(1);
    expect(starts.filter((start) => start.created)).toHaveLength(1);
  });
});
