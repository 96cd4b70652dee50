// nexusd gate for OpenCode: written by `nexusctl install opencode`, removed by `nexusctl uninstall opencode`.
// Every tool call runs `nexus-hook opencode` first and runs only when it answers {"decision": "allow"}.
// Anything else (a deny, a crash, no answer in time, unreadable output) throws, which blocks the tool.
import { spawn } from "node:child_process";

const HOOK = __NEXUS_HOOK_ARGV__;
const TIMEOUT_MS = __NEXUS_TIMEOUT_MS__;

function deny(reason) {
  return { decision: "deny", reason: `nexusd denied this tool call: ${reason}` };
}

function ask(payload) {
  return new Promise((resolve) => {
    let out = "";
    let err = "";
    let done = false;
    let timer = null;
    const finish = (answer) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      resolve(answer);
    };
    let child;
    try {
      child = spawn(HOOK[0], HOOK.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    } catch (e) {
      finish(deny(`nexus-hook could not start (${e && e.message})`));
      return;
    }
    timer = setTimeout(() => {
      try { child.kill("SIGKILL"); } catch (_) { /* already gone */ }
      finish(deny("no decision from nexusd in time"));
    }, TIMEOUT_MS);
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { err += d; });
    child.on("error", (e) => finish(deny(`nexus-hook could not run (${e && e.message})`)));
    child.on("close", (code) => {
      let answer = null;
      try { answer = JSON.parse(out); } catch (_) { answer = null; }
      if (code !== 0 || !answer || typeof answer !== "object") {
        const why = answer && typeof answer.reason === "string" ? answer.reason : err.trim();
        finish({ decision: "deny", reason: why || `nexusd denied this tool call: nexus-hook exited ${code}` });
        return;
      }
      finish(answer);
    });
    child.stdin.on("error", () => { /* the hook exited early: its exit code decides */ });
    child.stdin.end(JSON.stringify(payload));
  });
}

export const NexusdGate = async ({ directory, worktree }) => {
  const agents = new Map(); // sessionID -> the agent (build, plan ...) its last message went to
  return {
    "chat.message": async (input, output) => {
      // OpenCode 1.18 puts the agent on the user message; older ones on the hook's input
      const message = output && output.message;
      const agent = (message && message.agent) || (input && input.agent);
      if (input && typeof input.sessionID === "string" && typeof agent === "string") {
        agents.set(input.sessionID, agent);
      }
    },
    "tool.execute.before": async (input, output) => {
      const answer = await ask({
        hook_event_name: "tool.execute.before",
        tool: input.tool,
        sessionID: input.sessionID,
        callID: input.callID,
        agent: agents.get(input.sessionID),
        args: (output && output.args) || {},
        directory,
        worktree,
      });
      if (!answer || answer.decision !== "allow") {
        throw new Error(answer && typeof answer.reason === "string" ? answer.reason : "nexusd denied this tool call");
      }
      if (answer.args && typeof answer.args === "object") {
        if (output.args && typeof output.args === "object") {
          for (const key of Object.keys(output.args)) delete output.args[key];
          Object.assign(output.args, answer.args);
        } else {
          output.args = answer.args;
        }
      }
    },
  };
};
