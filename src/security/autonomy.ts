/**
 * Autonomy: how much the agent may do without a person saying yes.
 * The agent asks `decide` before every tool call, with the tool's own assessment.
 */
import type { ToolAssessment } from '../tool.ts';

/**
 * - `read_only`: only low-risk calls that change nothing;
 * - `supervised`: low-risk calls run, medium-risk ones ask the person on the chat, high-risk ones are refused;
 * - `full`: everything the tools themselves accept runs.
 */
export type Autonomy = 'read_only' | 'supervised' | 'full';

export const AUTONOMY_LEVELS: readonly Autonomy[] = ['read_only', 'supervised', 'full'];

export type Decision = { readonly kind: 'allow' } | { readonly kind: 'ask' } | { readonly kind: 'deny'; readonly reason: string };

/** What to do with a call: run it, ask the person first, or refuse it with a reason that names the setting. */
export function decide(autonomy: Autonomy, assessment: ToolAssessment): Decision {
  switch (autonomy) {
    case 'full':
      return { kind: 'allow' };
    case 'supervised':
      if (assessment.risk === 'high') {
        return deny(`"${assessment.summary}" is high risk and autonomy is supervised, which refuses high-risk calls; the owner can set [security] autonomy = "full" to allow them.`);
      }
      return assessment.risk === 'medium' ? { kind: 'ask' } : { kind: 'allow' };
    case 'read_only':
      if (assessment.mutates) {
        return deny(`"${assessment.summary}" would change something and autonomy is read-only; the owner can set [security] autonomy = "supervised" (asks first) or "full" to allow it.`);
      }
      if (assessment.risk !== 'low') {
        return deny(`"${assessment.summary}" is ${assessment.risk} risk and autonomy is read-only, which allows only low-risk reads; the owner can set [security] autonomy = "supervised" (asks first) or "full".`);
      }
      return { kind: 'allow' };
  }
}

function deny(reason: string): Decision {
  return { kind: 'deny', reason };
}

/**
 * For a tool's own `execute`: the reason to refuse when the autonomy level denies the call
 * outright (defence in depth; asking the person is the agent's job, not the tool's).
 */
export function deniedReason(autonomy: Autonomy, assessment: ToolAssessment): string | undefined {
  const decision = decide(autonomy, assessment);
  return decision.kind === 'deny' ? decision.reason : undefined;
}
