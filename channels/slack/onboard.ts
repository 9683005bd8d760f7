/** What `switchboard onboard` asks for Slack, and the `[channels.slack]` table it writes. */
import { field, allowLines, allowQuestion, askSecret, q, type ChannelTable, type Prompt } from '../../src/setup/onboard.ts';
import { SlackSchema } from './config.ts';

export async function onboard(ask: Prompt): Promise<ChannelTable> {
  const bot = await askSecret(ask, 'Slack: environment variable for the bot token (xoxb-…)', 'SLACK_BOT_TOKEN', 'OAuth & Permissions → Bot User OAuth Token');
  const mode = await ask.text('Slack: connect by socket (Socket Mode, no public URL) or http (Events API behind your proxy)', 'socket', (a) => (/^(socket|http)$/.test(a) ? undefined : 'answer socket or http'));
  const lines = [`bot_token = "\${${bot.env}}"`];
  const secrets = [bot];
  if (mode === 'socket') {
    const app = await askSecret(ask, 'Slack: environment variable for the app-level token (xapp-…)', 'SLACK_APP_TOKEN', 'Basic Information → App-Level Tokens, with connections:write');
    lines.push(`app_token = "\${${app.env}}"`);
    secrets.push(app);
  } else {
    const signing = await askSecret(ask, 'Slack: environment variable for the signing secret', 'SLACK_SIGNING_SECRET', 'Basic Information → Signing Secret');
    const listen = await ask.text('Slack: address the events listener binds (your proxy forwards /slack/events to it)', '127.0.0.1:3000', field(SlackSchema, 'listen'));
    lines.push(`signing_secret = "\${${signing.env}}"`, `listen = ${q(listen)}`);
    secrets.push(signing);
  }
  const allow = await ask.list(allowQuestion('Slack: member ids (profile → ⋮ → Copy member ID)'), []);
  return { lines: [...lines, ...allowLines(allow, 'U012AB3CD')], secrets };
}
