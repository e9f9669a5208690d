// A CopilotKit runtime (Node) whose agents are phasegraph's protocols. Point the frontend's
// <CopilotKit runtimeUrl="http://127.0.0.1:4000/api/copilotkit" agent="triggered_phase"> at it.
import { createServer } from "node:http";

import { HttpAgent } from "@ag-ui/client";
import { LangGraphAgent } from "@copilotkit/runtime/langgraph";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

const phasegraph = process.env.PHASEGRAPH_URL ?? "http://127.0.0.1:8000";
const protocols = ["triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract", "planner"];
const agents = {};
for (const id of protocols) {
  agents[id] = new LangGraphAgent({ deploymentUrl: phasegraph, graphId: id }); // phasegraph's LangGraph API
  agents[`${id}-ag-ui`] = new HttpAgent({ url: `${phasegraph}/ag-ui/${id}` }); // or its AG-UI endpoint
}
const listener = createCopilotNodeListener({ runtime: new CopilotRuntime({ agents }), basePath: "/api/copilotkit" });
createServer(listener).listen(Number(process.env.PORT ?? 4000), "127.0.0.1");
