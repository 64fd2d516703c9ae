// agent-registry: the edit gate and the session of OpenCode, written by `agent-registry harness
// install opencode` (run it again rather than editing this file: uninstall restores what was here
// before).
// - tool.execute.before runs this installation's hook with the call as JSON on stdin and throws
//   when the hook denies, so the tool does not run and the agent sees why. When the hook cannot
//   run at all, the call is refused too (AGENT_REGISTRY_ALLOW=1 lets it through).
// - When the hook's answer says it noted the held files (the backstop: "after": true),
//   tool.execute.after runs the after-tool hook for that call: a held file the call changed
//   is put back, and what the hook says (who holds it, the agent's version as a blob) is
//   appended to the tool's output, which the model reads.
// - The session is registered at the first event that names it (session.created, or any hook of
//   a session resumed with `opencode run -s ID`, which fires no session.created), bound to this
//   OpenCode process; it is finished when OpenCode disposes of the plugin or exits (`opencode run`
//   fires no session.deleted), or on session.deleted.
// - What the hooks answer (the session line, the messages waiting, a wake at the end of a turn)
//   is handed to the model: in the system prompt of each of its requests (what arrived is checked
//   before each request), and, with --wake, as a prompt of its own when the model's text is
//   complete or the session idle.
// - The repository is this file's own (<repo>/.opencode/plugin/), not OpenCode's directory
//   when that lies outside it (a stale $PWD).
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const EXE = __EXE__;
const GATE_ARGS = __GATE_ARGS__;
const STOP_ARGS = __STOP_ARGS__;
const START_ARGS = __START_ARGS__;
const WAKES = STOP_ARGS.includes("--wake");
// --hold listens at the session's idle only, never at each text of a turn
const TEXT_ARGS = STOP_ARGS.filter((a, i) => a !== "--hold" && STOP_ARGS[i - 1] !== "--hold");
const HERE = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

function hookArgs(event, extra) {
  return [...EXE.slice(1), "harness", "hook", "opencode", event, ...extra];
}

// a file the hooks cannot start without that is gone: the interpreter, or the package's
// launcher (harness/launch.py), whose absence the interpreter reports as its own exit 2
function gone() {
  return EXE.filter((p, i) => i === 0 || p.endsWith(".py")).find((p) => !existsSync(p));
}

function runHook(event, payload, extra = []) {
  return new Promise((done) => {
    const missing = gone();
    if (missing) {
      done({ status: null, stdout: "", stderr: "", error: { code: "ENOENT: " + missing } });
      return;
    }
    let child;
    try {
      child = spawn(EXE[0], hookArgs(event, extra), { stdio: ["pipe", "pipe", "pipe"] });
    } catch (error) {
      done({ status: null, stdout: "", stderr: "", error });
      return;
    }
    let stdout = "", stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), 60000);
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    child.on("error", (error) => { clearTimeout(timer); done({ status: null, stdout, stderr, error }); });
    child.on("close", (status) => { clearTimeout(timer); done({ status, stdout, stderr }); });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

function runHookNow(event, payload, extra = []) {  // at process exit nothing async runs
  return spawnSync(EXE[0], hookArgs(event, extra), {
    input: JSON.stringify(payload), encoding: "utf8", timeout: 20000,
  });
}

function answer(stdout) {
  try {
    const value = JSON.parse(stdout || "null");
    return value && typeof value === "object" ? value : {};
  } catch {
    return {};
  }
}

function denial(stdout) {
  const value = answer(stdout);
  const specific = value.hookSpecificOutput || {};
  if (value.deny === true || value.decision === "deny" || value.permission === "deny" ||
      specific.permissionDecision === "deny") {
    return value.reason || value.agent_message || specific.permissionDecisionReason ||
      "agent-registry: refused";
  }
  return null;
}

export const AgentRegistry = async ({ client, directory, worktree }) => {
  const where = resolve(directory || worktree || HERE);
  // OpenCode's directory, when it is this repository or inside it (relative paths of its
  // tools resolve from there); else this file's repository
  const cwd = where === HERE || where.startsWith(HERE + sep) ? where : HERE;
  const base = (sessionID) => ({ sessionID, cwd, project: HERE });
  const started = new Map();  // sessionID -> the promise of its session-start
  const noted = new Set();    // callIDs the backstop took a note for
  const ended = new Set();
  const told = new Map();     // sessionID -> what the hooks said, for the model
  const tell = (sessionID, text) => {
    if (!text) return;
    const lines = told.get(sessionID) || [];
    if (!lines.includes(text)) lines.push(text);
    told.set(sessionID, lines);
  };
  const start = (sessionID) => {
    if (!sessionID) return Promise.resolve();
    if (!started.has(sessionID)) {
      ended.delete(sessionID);
      started.set(sessionID, runHook("session-start", base(sessionID),
        ["--pid", String(process.pid), ...START_ARGS]).then((run) => tell(sessionID, answer(run.stdout).context)));
    }
    return started.get(sessionID);
  };
  const finish = async (sessionID) => {
    if (ended.has(sessionID) || !started.has(sessionID)) return;
    ended.add(sessionID);
    await started.get(sessionID);
    started.delete(sessionID);
    await runHook("session-end", base(sessionID));
  };
  const news = async (sessionID, extra) => {
    await start(sessionID);
    const run = await runHook("user-prompt-submit", { ...base(sessionID), ...extra });
    tell(sessionID, answer(run.stdout).context);
  };
  // the end of a turn: renew the session; with --wake, what arrived becomes a prompt of its
  // own, queued while the session still runs (OpenCode then goes on with it)
  const turnEnd = async (sessionID, args) => {
    const run = await runHook("stop", base(sessionID), args);
    const wake = answer(run.stdout).continue;
    if (!wake) return;
    tell(sessionID, wake);
    try {
      await client.session.promptAsync({ path: { id: sessionID },
        body: { parts: [{ type: "text", text: wake }] } });
    } catch (error) {
      console.error("agent-registry: could not hand the messages to the session: " + error);
    }
  };
  process.on("exit", () => {  // `opencode run` ends without session.deleted
    for (const sessionID of started.keys()) {
      if (!ended.has(sessionID)) runHookNow("session-end", base(sessionID));
    }
  });
  return {
    "tool.execute.before": async (input, output) => {
      await start(input.sessionID);
      const run = await runHook("pre-tool-use", {
        tool: input.tool, args: output.args, sessionID: input.sessionID, callID: input.callID,
        cwd, project: HERE,
      }, GATE_ARGS);
      if (run.status === 0) {
        const reason = denial(run.stdout);
        if (reason) throw new Error(reason);
        if (answer(run.stdout).after === true && input.callID) noted.add(input.callID);
        tell(input.sessionID, answer(run.stdout).context);  // a warning: the edit goes on
        return;
      }
      if (process.env.AGENT_REGISTRY_ALLOW === "1") return;
      if (run.status === 2 && run.stderr) throw new Error(run.stderr.trim());
      throw new Error("agent-registry: the edit gate could not run (" + EXE.join(" ") + ", " +
        (run.error ? run.error.code || run.error.message : "exit " + run.status) +
        "); repair: agent-registry harness install opencode, or AGENT_REGISTRY_ALLOW=1");
    },
    // the backstop's check of a call it noted: what it did is told in the tool's output
    "tool.execute.after": async (input, output) => {
      if (!input || !noted.delete(input.callID)) return;
      const run = await runHook("post-tool-use", {
        tool: input.tool, args: input.args, sessionID: input.sessionID, callID: input.callID,
        cwd, project: HERE,
      });
      if (run.status !== 0 && run.stderr) console.error(run.stderr.trim());
      const text = answer(run.stdout).context;
      if (text && output) output.output = (output.output ? output.output + "\n\n" : "") + text;
    },
    // a prompt of the person: a new turn, and what waits for the session
    "chat.message": async (input, output) => {
      const parts = (output && output.parts) || [];
      const prompt = parts.map((p) => (p && p.type === "text" && p.text) || "").join("\n");
      if (input && input.sessionID) await news(input.sessionID, { prompt });  // a wake's is no new turn
    },
    // before each request of the model: what arrived meanwhile, then all that was said
    "experimental.chat.system.transform": async (input, output) => {
      const sessionID = input && input.sessionID;
      if (!sessionID || !output || !Array.isArray(output.system)) return;
      await news(sessionID, { midturn: true });
      const lines = told.get(sessionID);
      if (lines && lines.length) output.system.push(lines.join("\n\n"));
    },
    // the model's text is complete: when it ends the turn, `opencode run` stops at the idle
    // that follows, too late for a new prompt; a wake is queued here, while it still runs
    "experimental.text.complete": async (input) => {
      if (WAKES && input && started.has(input.sessionID)) await turnEnd(input.sessionID, TEXT_ARGS);
    },
    event: async ({ event }) => {
      const props = (event && event.properties) || {};
      const sessionID = props.sessionID || (props.info && props.info.id);
      if (!sessionID) return;
      if (event.type === "session.created") {
        await start(sessionID);
      } else if (event.type === "session.deleted") {
        await finish(sessionID);
      } else if (event.type === "session.idle" && started.has(sessionID) && !ended.has(sessionID)) {
        await turnEnd(sessionID, STOP_ARGS);
      }
    },
    dispose: async () => {
      for (const sessionID of [...started.keys()]) await finish(sessionID);
    },
  };
};
