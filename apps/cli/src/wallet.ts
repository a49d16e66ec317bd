import { readFileSync } from 'node:fs';
import { password } from '@inquirer/prompts';
import { Wallet, type Provider } from 'ethers';
import { EXIT, CliError, usageError } from './errors.js';

export interface WalletOptions {
  /** An encrypted JSON keystore (ethers, geth, foundry's `cast wallet`). */
  readonly keystore?: string;
}

/**
 * The wallet a command signs with: `SVC_PRIVATE_KEY`, else `--keystore <file>` opened with
 * `SVC_KEYSTORE_PASSWORD` or a password prompt, else a prompt for the private key. A prompt needs a
 * terminal; a script sets the variables instead. The key is never written anywhere.
 */
export async function loadWallet(
  options: WalletOptions,
  env: NodeJS.ProcessEnv,
  provider?: Provider,
): Promise<Wallet> {
  const wallet = await openWallet(options, env);
  return provider ? wallet.connect(provider) : wallet;
}

async function openWallet(options: WalletOptions, env: NodeJS.ProcessEnv): Promise<Wallet> {
  if (env.SVC_PRIVATE_KEY) return walletOfKey(env.SVC_PRIVATE_KEY, 'SVC_PRIVATE_KEY');
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

async function ask(message: string, instead: string): Promise<string> {
  if (!process.stdin.isTTY) throw usageError(`no wallet given and no terminal to ask on: ${instead}`);
  return password({ message, mask: '*' }, { output: process.stderr });
}
