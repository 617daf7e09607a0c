#include "commands.hpp"

namespace cli {

int run_verity(Args) { throw UsageError("'verity' is not built yet"); }

}  // namespace cli
