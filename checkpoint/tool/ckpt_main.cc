// athanor-ckpt: list and verify checkpoints in an object store (see ckpt_tool.h).
#include <iostream>

#include "checkpoint/tool/ckpt_tool.h"

int main(int argc, char** argv) { return athanor::RunCkptTool(argc, argv, std::cout, std::cerr); }
