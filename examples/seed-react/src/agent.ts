// agent.ts — Agent config and tools. This is the only file you edit.

type Ctx = { secrets: Record<string, string>; fetch: typeof fetch };

export const config = {
  instructions: "You are a helpful weather assistant. Be concise.",
  greeting: "Hey! Ask me about the weather.",
  voice: "jess",
};

export const tools = {
  get_weather: {
    description: "Get current weather for a city",
    parameters: { city: { type: "string", description: "City name" } },
    handler: async (args: { city: string }, ctx: Ctx) => {
      const resp = await ctx.fetch(
        `https://api.weather.com/current?city=${encodeURIComponent(args.city)}`,
        { headers: { "X-Api-Key": ctx.secrets.WEATHER_API_KEY } }
      );
      return await resp.json();
    },
  },
};
