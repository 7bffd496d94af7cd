// Declarations only; see context.h.
#pragma once
#include <gloo/context.h>
