#include "commands.hpp"

namespace cli {

int run_fsverity(Args) { throw UsageError("'fsverity' is not built yet"); }

}  // namespace cli
