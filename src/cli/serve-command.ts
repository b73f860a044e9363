import type { Command } from './command.ts';

export const serveCommand: Command = {
  name: 'serve',
  summary: 'Run the gateway (what `npm start` runs).',
  synopsis: '',
  description: [
    'Configured by environment variables only (see docs/configuration.md, or',
    '`gatehouse config check`). Stops cleanly on SIGTERM or SIGINT.',
  ],
  options: {},
  optionHelp: {},
  async run(io) {
    // Loaded on use: the other commands and `--help` start without fastify and the proxy.
    const { serve } = await import('../main.ts');
    await serve(io.env);
    return 'running';
  },
};
