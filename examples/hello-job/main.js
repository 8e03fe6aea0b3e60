// A background job for `docs/executions.md`: it greets, works for a moment, and exits 0,
// which ends its `once` occurrence and settles the application.
const greeting = process.env.GREETING ?? "nobody";
console.log(`hello, ${greeting}`);
setTimeout(() => {
  console.log("done");
  process.exit(0);
}, 2000);
