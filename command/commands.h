// Entry points of the subcommands of the one `jiriki` binary; each lives in its own file here.
#pragma once

namespace jiriki {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

int cmd_perft(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_nn(int argc, char** argv);
int cmd_usi(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_records(int argc, char** argv);
int cmd_selfplay(int argc, char** argv);
int cmd_book(int argc, char** argv);
int cmd_play(int argc, char** argv);
int cmd_match(int argc, char** argv);
int cmd_loop(int argc, char** argv);
int cmd_version(int argc, char** argv);

// `jiriki bench KIND`: each benchmark lives beside the subcommand it measures.
int bench_perft(int argc, char** argv);
int bench_nn(int argc, char** argv);
int bench_search(int argc, char** argv);
int bench_train(int argc, char** argv);
int bench_book(int argc, char** argv);
int bench_allreduce(int argc, char** argv);

}  // namespace jiriki
