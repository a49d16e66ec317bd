import { afterAll, describe, expect, it } from '@jest/globals';
import { copyFile, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SessionKeyPair } from '@svc/chain';
import { SessionKeyVault } from '../../src/sessions/session-key-vault.js';

const directories: string[] = [];
const scryptN = 1 << 10;

async function freshDirectory(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'session-vault-'));
  directories.push(directory);
  return directory;
}

afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

describe('SessionKeyVault', () => {
  it('keeps keys encrypted at rest and gives them back after a restart', async () => {
    const directory = await freshDirectory();
    const keyPair = SessionKeyPair.generate();
    await (await SessionKeyVault.open({ directory, password: 'pw', scryptN })).put(42n, keyPair);
    const onDisk = await readFile(join(directory, '42.session-key.json'), 'utf8');
    expect(onDisk).not.toContain(Buffer.from(keyPair.exportPrivateKey()).toString('base64'));
    expect(onDisk).not.toContain(Buffer.from(keyPair.exportPrivateKey()).toString('hex'));

    const reopened = await SessionKeyVault.open({ directory, password: 'pw', scryptN });
    expect(await reopened.sessionIds()).toEqual([42n]);
    expect((await reopened.get(42n))!.publicKey).toEqual(keyPair.publicKey);
  });

  it('does not open with another password, nor under another session id', async () => {
    const directory = await freshDirectory();
    await (
      await SessionKeyVault.open({ directory, password: 'pw', scryptN })
    ).put(1n, SessionKeyPair.generate());
    const wrong = await SessionKeyVault.open({ directory, password: 'not it', scryptN });
    await expect(wrong.get(1n)).rejects.toThrow();
    await copyFile(join(directory, '1.session-key.json'), join(directory, '2.session-key.json'));
    const right = await SessionKeyVault.open({ directory, password: 'pw', scryptN });
    await expect(right.get(2n)).rejects.toThrow();
  });

  it('forgets a key for good', async () => {
    const directory = await freshDirectory();
    const vault = await SessionKeyVault.open({ directory, password: 'pw', scryptN });
    await vault.put(5n, SessionKeyPair.generate());
    await vault.forget(5n);
    expect(await vault.get(5n)).toBeUndefined();
    expect((await readdir(directory)).filter((name) => name.startsWith('5.'))).toEqual([]);
    const reopened = await SessionKeyVault.open({ directory, password: 'pw', scryptN });
    expect(await reopened.get(5n)).toBeUndefined();
  });
});
