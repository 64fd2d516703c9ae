// agent-registry: the edit gate for OpenCode, written by `agent-registry harness install opencode`
// (run it again rather than editing this file: uninstall restores what was here before).
// tool.execute.before runs this installation's hook with the call as JSON on stdin and throws
// when the hook denies, so the tool does not run and the agent sees why. When the hook cannot
// run at all, the call is refused too (AGENT_REGISTRY_ALLOW=1 lets it through).
import { spawnSync } from "node:child_process";

const EXE = __EXE__;
const GATE_ARGS = __GATE_ARGS__;

function runHook(event, payload, extra = []) {
  return spawnSync(EXE[0], [...EXE.slice(1), "harness", "hook", "opencode", event, ...extra], {
    input: JSON.stringify(payload),
    encoding: "utf8",
    timeout: 60000,
  });
}

function denial(stdout) {
  let answer;
  try {
    answer = JSON.parse(stdout || "null");
  } catch {
    return null;
  }
  if (!answer || typeof answer !== "object") return null;
  const specific = answer.hookSpecificOutput || {};
  if (answer.deny === true || answer.decision === "deny" || answer.permission === "deny" ||
      specific.permissionDecision === "deny") {
    return answer.reason || answer.agent_message || specific.permissionDecisionReason ||
      "agent-registry: refused";
  }
  return null;
}

export const AgentRegistry = async ({ directory, worktree }) => {
  const cwd = directory || worktree || process.cwd();
  return {
    "tool.execute.before": async (input, output) => {
      const run = runHook("pre-tool-use", {
        tool: input.tool, args: output.args, sessionID: input.sessionID, cwd,
      }, GATE_ARGS);
      if (run.status === 0) {
        const reason = denial(run.stdout);
        if (reason) throw new Error(reason);
        return;
      }
      if (process.env.AGENT_REGISTRY_ALLOW === "1") return;
      if (run.status === 2 && run.stderr) throw new Error(run.stderr.trim());
      throw new Error("agent-registry: the edit gate could not run (" + EXE[0] + ", " +
        (run.error ? run.error.code || run.error.message : "exit " + run.status) +
        "); repair: agent-registry harness install opencode, or AGENT_REGISTRY_ALLOW=1");
    },
    event: async ({ event }) => {
      const names = { "session.created": "session-start", "session.idle": "stop",
                      "session.deleted": "session-end" };
      const name = event && names[event.type];
      if (!name) return;
      const props = event.properties || {};
      const sessionID = props.sessionID || (props.info && props.info.id);
      if (sessionID) runHook(name, { sessionID, cwd });  // never blocks: errors are the hook's to report
    },
  };
};
