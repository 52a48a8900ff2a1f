"""The regression gate on a GPU: the baseline's and adaptive effort's runs, and the checks of what they left."""
