// Declarations only; see ../context.h.
#pragma once
