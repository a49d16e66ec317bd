// `svc`: see `svc --help` and docs/cli.md.
import { runCli } from './program.js';

// Whoever reads the output went away (`svc chat … | head`): stop quietly, as Unix tools do.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

process.exitCode = await runCli(process.argv.slice(2));
