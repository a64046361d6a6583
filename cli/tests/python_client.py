"""Drive `runcore drive` from Python: one prompt, one tool call, one answer."""
import json, subprocess, sys

proc = subprocess.Popen([sys.argv[1], "drive"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

def send(line):
    """Write one input line; read its output lines up to and including its idle."""
    proc.stdin.write(json.dumps(line) + "\n")
    proc.stdin.flush()
    out = [json.loads(proc.stdout.readline())]
    while out[-1]["type"] != "idle":
        out.append(json.loads(proc.stdout.readline()))
    return out

def first(out, kind):
    return next(o for o in out if o["type"] == kind)

def answer(call, stop_reason, *content):
    message = {"role": "assistant", "content": list(content), "stop_reason": stop_reason}
    return send({"type": "model_done", "run_id": call["run_id"], "step": call["step"], "message": message})

out = send({"type": "prompt", "text": "What is the weather in Paris?"})
out = answer(first(out, "call_model"), "tool_use",
             {"type": "tool_call", "id": "call-1", "name": "weather", "arguments": {"city": "Paris"}})
tools = first(out, "execute_tools")
for call in tools["calls"]:
    out = send({"type": "tool_done", "run_id": tools["run_id"], "call_id": call["id"], "content": "18 C, sunny"})
out = answer(first(out, "call_model"), "stop", {"type": "text", "text": "It is 18 C and sunny."})
print(next(o["event"]["result"]["cause"]["type"] for o in out
           if o["type"] == "event" and o["event"]["type"] == "run_end"))
proc.stdin.close()
sys.exit(proc.wait())
