/* placeholder replaced by the driver below */
int main(void) { return 0; }
