/**
 * What `switchboard onboard` asks for each channel — what its `[channels.X]` table needs,
 * secrets as the name of an environment variable (the file reads "${NAME}"), and who may
 * talk (`allow`) — and the TOML it writes. Answers are checked against the config schema as
 * they are given, so the written file validates.
 */
import * as v from 'valibot';
import { schemaAt } from '../src/config/schema.ts';
import type { Prompt } from './prompt.ts';

export const channelNames = ['terminal', 'telegram', 'discord', 'slack', 'matrix', 'irc', 'email', 'webhook'] as const;
export type ChannelName = (typeof channelNames)[number];

/** A secret the config reads from the environment, and where to get it. */
export interface Secret {
  readonly env: string;
  readonly hint: string;
}

/** One channel's part of the config. */
export interface ChannelAnswers {
  readonly name: ChannelName;
  /** The table's lines (keys and comments), without the [channels.X] header. */
  readonly lines: readonly string[];
  readonly secrets: readonly Secret[];
}

/** A check for the value at `path`, from the config schema (its own description of a right value). */
export function field(...path: string[]): (answer: string) => string | undefined {
  const schema = schemaAt(path);
  return (answer) => {
    if (answer === '') return 'an answer is needed';
    if (!schema) return undefined;
    const result = v.safeParse(schema as unknown as v.GenericSchema, answer);
    if (result.success) return undefined;
    const issue = result.issues[0];
    return issue.type === 'regex' ? `must be ${issue.message}` : issue.message;
  };
}

/** An environment variable name, for "${NAME}". */
export const envName = (answer: string): string | undefined => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(answer) ? undefined : 'an environment variable name: letters, digits and _');

const q = (value: string): string => JSON.stringify(value);
const list = (values: readonly string[]): string => `[${values.map(q).join(', ')}]`;

/** `allow = [...]`, or a comment saying what its absence means. */
function allowLines(allow: readonly string[], example: string): string[] {
  if (allow.length > 0) return [`allow = ${list(allow)}`];
  return [`# allow = [${q(example)}]   # without allow, a stranger gets a pairing code: switchboard pairing approve …`];
}

const allowQuestion = (who: string): string => `${who} who may talk, comma-separated (* = anyone; empty = strangers get a pairing code you approve)`;

/** Asks what `name` needs; returns its table. */
export async function askChannel(name: ChannelName, ask: Prompt): Promise<ChannelAnswers> {
  const secret = async (question: string, fallback: string, hint: string): Promise<Secret> => ({ env: await ask.text(question, fallback, envName), hint });
  switch (name) {
    case 'terminal':
      return { name, lines: ['# The person at the terminal; default: your OS user name.', '# user = "alice"'], secrets: [] };
    case 'telegram': {
      const token = await secret('Telegram: environment variable for the bot token', 'TELEGRAM_BOT_TOKEN', 'talk to @BotFather, /newbot, copy the token');
      const allow = await ask.list(allowQuestion('Telegram: numeric user ids (ask @userinfobot)'), []);
      return { name, lines: [`token = "\${${token.env}}"`, ...allowLines(allow, '123456789')], secrets: [token] };
    }
    case 'discord': {
      const token = await secret('Discord: environment variable for the bot token', 'DISCORD_BOT_TOKEN', 'Developer Portal → Bot → Reset Token; enable the Message Content intent');
      const allow = await ask.list(allowQuestion('Discord: user ids (Developer Mode → Copy User ID)'), []);
      return { name, lines: [`token = "\${${token.env}}"`, ...allowLines(allow, '80351110224678912')], secrets: [token] };
    }
    case 'slack': {
      const bot = await secret('Slack: environment variable for the bot token (xoxb-…)', 'SLACK_BOT_TOKEN', 'OAuth & Permissions → Bot User OAuth Token');
      const mode = await ask.text('Slack: connect by socket (Socket Mode, no public URL) or http (Events API behind your proxy)', 'socket', (a) => (/^(socket|http)$/.test(a) ? undefined : 'answer socket or http'));
      const lines = [`bot_token = "\${${bot.env}}"`];
      const secrets = [bot];
      if (mode === 'socket') {
        const app = await secret('Slack: environment variable for the app-level token (xapp-…)', 'SLACK_APP_TOKEN', 'Basic Information → App-Level Tokens, with connections:write');
        lines.push(`app_token = "\${${app.env}}"`);
        secrets.push(app);
      } else {
        const signing = await secret('Slack: environment variable for the signing secret', 'SLACK_SIGNING_SECRET', 'Basic Information → Signing Secret');
        const listen = await ask.text('Slack: address the events listener binds (your proxy forwards /slack/events to it)', '127.0.0.1:3000', field('channels', 'slack', 'listen'));
        lines.push(`signing_secret = "\${${signing.env}}"`, `listen = ${q(listen)}`);
        secrets.push(signing);
      }
      const allow = await ask.list(allowQuestion('Slack: member ids (profile → ⋮ → Copy member ID)'), []);
      return { name, lines: [...lines, ...allowLines(allow, 'U012AB3CD')], secrets };
    }
    case 'matrix': {
      const homeserver = await ask.text('Matrix: homeserver URL, e.g. https://matrix.example.org', '', field('channels', 'matrix', 'homeserver'));
      const userId = await ask.text("Matrix: the bot's user id, e.g. @switchboard:example.org", '', field('channels', 'matrix', 'user_id'));
      const login = await ask.text('Matrix: log in with an access_token or a password', 'access_token', (a) => (/^(access_token|password)$/.test(a) ? undefined : 'answer access_token or password'));
      const credential = await secret(
        `Matrix: environment variable for the ${login === 'password' ? 'password' : 'access token'}`,
        login === 'password' ? 'MATRIX_PASSWORD' : 'MATRIX_ACCESS_TOKEN',
        login === 'password' ? "the bot account's password" : "the bot account's access token (Element: Settings → Help & About → Access Token)",
      );
      const rooms = await ask.list('Matrix: rooms to join, comma-separated ids or aliases (empty = none; invites from allowed people are accepted)', [], field('channels', 'matrix', 'rooms', '0'));
      const allow = await ask.list(allowQuestion('Matrix: user ids (e.g. @alice:example.org)'), []);
      return {
        name,
        lines: [`homeserver = ${q(homeserver)}`, `user_id = ${q(userId)}`, `${login} = "\${${credential.env}}"`, ...(rooms.length > 0 ? [`rooms = ${list(rooms)}`] : []), ...allowLines(allow, '@alice:example.org')],
        secrets: [credential],
      };
    }
    case 'irc': {
      const host = await ask.text('IRC: server', 'irc.libera.chat', field('channels', 'irc', 'host'));
      const tls = await ask.yes('IRC: TLS', true);
      const port = await ask.text('IRC: port', tls ? '6697' : '6667', (a) => (/^\d{1,5}$/.test(a) && Number(a) >= 1 && Number(a) <= 65_535 ? undefined : 'a port number 1–65535'));
      const nick = await ask.text('IRC: nick', 'switchboard', field('channels', 'irc', 'nick'));
      const channels = await ask.list('IRC: channels to join, comma-separated (empty = none; private messages are answered anyway)', [], (a) => (/^[#&]\S+( \S+)?$/.test(a) ? undefined : 'a channel name like #switchboard'));
      const allow = await ask.list(allowQuestion('IRC: nicks or nick!user@host masks'), []);
      return {
        name,
        lines: [
          `host = ${q(host)}`,
          `port = ${Number(port)}`,
          `tls = ${tls}`,
          `nick = ${q(nick)}`,
          ...(channels.length > 0 ? [`channels = ${list(channels)}`] : []),
          '# SASL, a server password or NickServ: see switchboard.example.toml.',
          ...allowLines(allow, 'alice'),
        ],
        secrets: [],
      };
    }
    case 'email': {
      const address = await ask.text("Email: the bot's own address (it answers every unread mail from allowed senders there)", '', field('channels', 'email', 'address'));
      const domain = address.split('@')[1] ?? 'example.org';
      const imap = await ask.text('Email: IMAP server (TLS, port 993)', `mail.${domain}`, field('channels', 'email', 'imap', 'host'));
      const smtp = await ask.text('Email: SMTP server (TLS, port 465)', imap, field('channels', 'email', 'smtp', 'host'));
      const user = await ask.text('Email: login name on both', address, field('channels', 'email', 'imap', 'user'));
      const password = await secret('Email: environment variable for the password', 'EMAIL_PASSWORD', "the mailbox's password (an app password where the provider has them)");
      const allowed = await ask.list('Email: addresses that may write, comma-separated, e.g. alice@example.org, *@example.org (required: strangers are never answered)', [], field('channels', 'email', 'allow', '0'), true);
      const server = (host: string): string => `{ host = ${q(host)}, user = ${q(user)}, password = "\${${password.env}}" }`;
      return {
        name,
        lines: [`address = ${q(address)}`, '# Implicit TLS on 993 / 465 by default; add port = …, tls = false for STARTTLS servers.', `imap = ${server(imap)}`, `smtp = ${server(smtp)}`, `allow = ${list(allowed)}`],
        secrets: [password],
      };
    }
    case 'webhook': {
      const key = await secret('Webhook: environment variable for the signing secret', 'WEBHOOK_SECRET', 'any long random string: openssl rand -hex 32; callers sign each body with it');
      const allow = await ask.list('Webhook: sender ids that may talk, comma-separated (* = any caller that signs)', ['*']);
      return { name, lines: [`secret = "\${${key.env}}"`, `allow = ${list(allow)}`], secrets: [key] };
    }
  }
}
