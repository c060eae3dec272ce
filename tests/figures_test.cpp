// Tests of focal_figures (being written).
#include <gtest/gtest.h>

#include "focal_figures/figures.h"

TEST(Figures, Kinds) { EXPECT_EQ(focal::figures::figure_kinds().size(), 5u); }
