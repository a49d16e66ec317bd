import { readFileSync } from 'node:fs';
import { password } from '@inquirer/prompts';
import { Wallet, type Provider } from 'ethers';
import { EXIT, CliError, usageError } from './errors.js';

export interface WalletOptions {
  /** An encrypted JSON keystore (ethers, geth, foundry's `cast wallet`). */
  readonly keystore?: string;
}

export interface WalletSource {
  readonly env: NodeJS.ProcessEnv;
  /** Whether a prompt may ask (a terminal, and no --json); otherwise a missing secret is a usage error. */
  readonly canPrompt: boolean;
  readonly provider?: Provider;
}

/**
 * The wallet a command signs with: `--keystore <file>` (the flag wins) opened with
 * `SVC_KEYSTORE_PASSWORD` or a password prompt, else `SVC_PRIVATE_KEY`, else a prompt for the private
 * key. A script sets the variables instead of answering prompts. The key is never written anywhere.
 */
export async function loadWallet(options: WalletOptions, source: WalletSource): Promise<Wallet> {
  const wallet = await openWallet(options, source);
  return source.provider ? wallet.connect(source.provider) : wallet;
}

async function openWallet(options: WalletOptions, { env, canPrompt }: WalletSource): Promise<Wallet> {
  const ask = async (message: string, instead: string) => {
    if (!canPrompt || !process.stdin.isTTY)
      throw usageError(`no wallet given and nothing to ask on (no terminal, or --json): ${instead}`);
    return password({ message, mask: '*' }, { output: process.stderr });
  };
  if (options.keystore) {
    let json: string;
    try {
      json = readFileSync(options.keystore, 'utf8');
    } catch (error) {
      throw usageError(`cannot read the keystore ${options.keystore}: ${(error as Error).message}`);
    }
    const secret =
      env.SVC_KEYSTORE_PASSWORD ??
      (await ask(`Password of ${options.keystore}`, 'set SVC_KEYSTORE_PASSWORD'));
    try {
      const wallet = await Wallet.fromEncryptedJson(json, secret);
      return wallet instanceof Wallet ? wallet : new Wallet(wallet.privateKey);
    } catch (error) {
      throw new CliError(
        `cannot open the keystore ${options.keystore}: ${(error as Error).message}`,
        EXIT.usage,
        {
          remedy: 'Check the file and its password',
        },
      );
    }
  }
  if (env.SVC_PRIVATE_KEY) return walletOfKey(env.SVC_PRIVATE_KEY, 'SVC_PRIVATE_KEY');
  return walletOfKey(
    await ask('Private key of the wallet (0x…)', 'set SVC_PRIVATE_KEY or pass --keystore'),
    'the key',
  );
}

function walletOfKey(key: string, source: string): Wallet {
  const trimmed = key.trim();
  try {
    return new Wallet(trimmed.startsWith('0x') ? trimmed : `0x${trimmed}`);
  } catch {
    throw usageError(`${source} is not a private key (32 bytes of hex)`);
  }
}
