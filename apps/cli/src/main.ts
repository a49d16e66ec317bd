// `svc`: see `svc --help` and docs/cli.md.
import { runCli } from './program.js';

process.exitCode = await runCli(process.argv.slice(2));
