// Helpers for test suites only; product code never imports this package.
export {};
