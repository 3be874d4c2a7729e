// agent.ts — the agent's config and tools. This is the file you edit to change the agent.
import type { ClientTool, ServerTool, ToolContext, VoiceAgentConfig } from "./platform";

export const config: VoiceAgentConfig = {
  instructions:
    "You are a friendly order-tracking assistant for an online shop. Be concise: one or two " +
    "sentences. To answer a question about an order, ask for the order ID if you do not have " +
    "it, call get_order_status, then call show_order so the customer sees the order on the " +
    "page, and summarise the status in words. Never invent an order's status.",
  greeting: "Hi! I can check where your order is. What's your order ID?",
  voice: "jess",
};

// Server tools run on the platform, in its sandbox: the handler is sent as source text
// (handler.toString()), so it must be self-contained (no imports, no outside variables).
// ctx.secrets.ORDERS_KEY is a workspace secret (allowed_hosts: ["api.example.com"]);
// ctx.fetch is the platform's proxied fetch.
export const tools: Record<string, ServerTool> = {
  get_order_status: {
    description: "Look up an order's status, items and estimated delivery by its ID",
    parameters: { orderId: { type: "string", description: "The order ID, e.g. A1234" } },
    handler: async (args: { orderId: string }, ctx: ToolContext) => {
      const resp = await ctx.fetch(
        `https://api.example.com/orders/${encodeURIComponent(args.orderId)}`,
        { headers: { Authorization: `Bearer ${ctx.secrets.ORDERS_KEY}` } },
      );
      if (resp.status === 404) return { found: false, orderId: args.orderId };
      if (!resp.ok) throw new Error(`the order service answered ${resp.status}`);
      return await resp.json();
    },
  },
};

export interface ShownOrder {
  orderId: string;
  status: string;
  eta?: string;
  items?: string;
}

// Client tools run in this page. `show` is how a tool reaches the UI (App passes its setter).
export function createClientTools(show: (order: ShownOrder) => void): Record<string, ClientTool> {
  return {
    show_order: {
      description: "Show an order's details on the customer's screen",
      parameters: {
        orderId: { type: "string", description: "The order ID" },
        status: { type: "string", description: "Status in a few words, e.g. 'Shipped'" },
        eta: { type: "string", description: "Estimated delivery, if known", optional: true },
        items: { type: "string", description: "The items, comma separated", optional: true },
      },
      run: (args: ShownOrder) => {
        show(args);
        return { shown: true };
      },
    },
  };
}
