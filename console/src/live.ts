/** The one live feed of an open console (Server-Sent Events), shared by the pages. */
import { createContext } from 'preact';

export interface ChannelStatus {
  name: string;
  state: string;
  since: string;
  restarts: number;
  lastError?: string;
  lastErrorAt?: string;
  lastInboundAt?: string;
  notes?: string[];
}

export interface ActivityMinute {
  at: number;
  received: number;
  sent: number;
  providerErrors: number;
  turns: number;
  p50?: number;
  p95?: number;
}

export interface Overview {
  status: {
    version?: string;
    pid: number;
    startedAt: string;
    uptimeSeconds: number;
    channels: ChannelStatus[];
    queued: number;
    inFlight: number;
    pendingReplies: number;
    totals: Record<string, number>;
    storage?: { code: string; since: string };
    /** Cluster mode: every node as last reported. */
    cluster?: { node: string; nodes: Array<{ node: string; alive: boolean; channels: string[]; inFlight: number; turns: number; seenAt: number; version: string }> };
  };
  model: string;
  node: string;
  activity: ActivityMinute[];
}

export type ChatEvent =
  | { type: 'message'; id: string; text: string; at: number }
  | { type: 'draft'; id: string; text: string; at: number }
  | { type: 'file'; id: string; name: string; url: string; at: number; image?: { width: number; height: number } };

export interface LogLine {
  seq: number;
  level: number;
  time: number;
  msg: string;
  channel?: string;
  line: string;
}

export interface Live {
  overview: Overview | undefined;
  connected: boolean;
  onChat(listener: (event: ChatEvent) => void): () => void;
  onLog(listener: (line: LogLine) => void): () => void;
}

export const LiveContext = createContext<Live>({ overview: undefined, connected: false, onChat: () => () => undefined, onLog: () => () => undefined });
